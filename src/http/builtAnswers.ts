// Answers built whole and kept by what they are built from (a closed window's stats, the CAP
// feed of a minute and an event-log position): a body many readers ask for is built once.
// Bounded by bytes, least recently used first out; asks for a body under construction share it.

export class BuiltAnswers {
  private readonly bodies = new Map<string, string>();
  private readonly building = new Map<string, Promise<string>>();
  private bytes = 0;

  constructor(private readonly maxBytes = 32 * 1024 * 1024) {}

  /** The body kept under `key`, made the most recently used; undefined when none is. */
  get(key: string): string | undefined {
    const body = this.bodies.get(key);
    if (body !== undefined) {
      this.bodies.delete(key);
      this.bodies.set(key, body);
    }
    return body;
  }

  /** Keeps `body` under `key` (a body larger than half the budget is not kept). */
  set(key: string, body: string): void {
    if (body.length * 2 > this.maxBytes || this.bodies.has(key)) return;
    this.bodies.set(key, body);
    this.bytes += body.length * 2;
    for (const [oldest, old] of this.bodies) {
      if (this.bytes <= this.maxBytes) break;
      this.bodies.delete(oldest);
      this.bytes -= old.length * 2;
    }
  }

  /** The body kept under `key`, or the one `build` makes (once, however many ask meanwhile), then kept. */
  async of(key: string, build: () => Promise<string>): Promise<string> {
    const kept = this.get(key);
    if (kept !== undefined) return kept;
    let pending = this.building.get(key);
    if (!pending) {
      pending = build()
        .then((body) => {
          this.set(key, body);
          return body;
        })
        .finally(() => this.building.delete(key));
      this.building.set(key, pending);
    }
    return pending;
  }
}
