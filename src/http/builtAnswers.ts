// Answers built whole and kept by what they are built from (a closed window's stats, the CAP
// feed of a minute and an event-log position, and its encodings): a body many readers ask for is
// built once, and asks for a body under construction share it. Bounded by bytes, least recently
// used first out; a body kept in a slot (the CAP feed of an area) replaces the slot's older one,
// which no one can ask for again.

type Body = string | Buffer;

const sizeOf = (body: Body) => (typeof body === 'string' ? body.length * 2 : body.byteLength);

export class BuiltAnswers<T extends Body = string> {
  private readonly bodies = new Map<string, T>();
  private readonly building = new Map<string, Promise<T>>();
  /** The key kept in each slot. */
  private readonly slots = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly maxBytes = 32 * 1024 * 1024) {}

  /** The body kept under `key`, made the most recently used; undefined when none is. */
  get(key: string): T | undefined {
    const body = this.bodies.get(key);
    if (body !== undefined) {
      this.bodies.delete(key);
      this.bodies.set(key, body);
    }
    return body;
  }

  /** Keeps `body` under `key` (in `slot`, replacing its older body); one larger than half the budget is not kept. */
  set(key: string, body: T, slot?: string): void {
    if (sizeOf(body) * 2 > this.maxBytes || this.bodies.has(key)) return;
    if (slot !== undefined) {
      const older = this.slots.get(slot);
      if (older !== undefined) this.drop(older);
      this.slots.set(slot, key);
    }
    this.bodies.set(key, body);
    this.bytes += sizeOf(body);
    for (const oldest of this.bodies.keys()) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }

  /** The body kept under `key`, or the one `build` makes (once, however many ask meanwhile), then kept (in `slot`). */
  async of(key: string, build: () => Promise<T>, slot?: string): Promise<T> {
    const kept = this.get(key);
    if (kept !== undefined) return kept;
    let pending = this.building.get(key);
    if (!pending) {
      pending = build()
        .then((body) => {
          this.set(key, body, slot);
          return body;
        })
        .finally(() => this.building.delete(key));
      this.building.set(key, pending);
    }
    return pending;
  }

  private drop(key: string): void {
    const body = this.bodies.get(key);
    if (body === undefined) return;
    this.bodies.delete(key);
    this.bytes -= sizeOf(body);
  }
}
