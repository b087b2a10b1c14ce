// A gap-free, append-only sequence of numbered objects on the object store: <prefix><n, 12 digits>.json.
//
// Why this is sound on S3 without read-modify-write: an entry is only ever created with a
// conditional PUT (If-None-Match: *), so two writers can never both create number n, and a
// writer only tries n + 1 once it has seen n exist (listed, written by itself, or refused to it
// because it exists). Number n + 1 therefore never appears before n, so a reader that follows
// the sequence in order can never skip an entry that appears late; it only waits for it. Entries
// are never changed after creation; pruning removes the oldest, always keeping the newest (so a
// writer never re-creates a number that was pruned).
import type { ObjectStore } from '../store/objectStore.js';

const DIGITS = 12;
/** Every this many entries, the newest number is noted in <prefix>head.json, where a new reader starts listing. */
const HINT_EVERY = 100;

export class ObjectSequence<T> {
  /** The highest number this process has seen exist (0: none yet, or not looked). */
  private known = 0;

  constructor(
    private readonly store: ObjectStore,
    readonly prefix: string,
  ) {}

  key(n: number): string {
    return `${this.prefix}${String(n).padStart(DIGITS, '0')}.json`;
  }

  private numberOf(key: string): number | undefined {
    const m = /^(\d{12})\.json$/.exec(key.slice(this.prefix.length));
    return m ? Number(m[1]) : undefined;
  }

  /** The numbers that exist after `after`, in order (one ranged listing). */
  async numbersAfter(after: number): Promise<{ n: number; lastModified: Date }[]> {
    const out: { n: number; lastModified: Date }[] = [];
    const startAfter = after > 0 ? this.key(after) : undefined;
    for await (const info of this.store.list({ prefix: this.prefix, ...(startAfter && { startAfter }) })) {
      const n = this.numberOf(info.key);
      if (n !== undefined) out.push({ n, lastModified: info.lastModified });
    }
    return out;
  }

  /** The newest number (0 when the sequence is empty). */
  async head(): Promise<number> {
    if (this.known === 0) {
      // A hint only saves listing a long sequence from its start: it is never above the truth.
      const hint = await this.store.get(`${this.prefix}head.json`);
      const n = hint ? Number((JSON.parse(hint.body.toString('utf8')) as { n?: unknown }).n) : 0;
      if (Number.isSafeInteger(n) && n > 1) this.known = n - 1;
    }
    const after = await this.numbersAfter(this.known);
    if (after.length > 0) this.known = Math.max(this.known, after.at(-1)!.n);
    return this.known;
  }

  /** Forgets the newest number seen: the next head() lists from the start (or from the hint). */
  forget(): void {
    this.known = 0;
  }

  async get(n: number): Promise<T | undefined> {
    const obj = await this.store.get(this.key(n));
    if (!obj) return undefined;
    this.known = Math.max(this.known, n);
    return JSON.parse(obj.body.toString('utf8')) as T;
  }

  /**
   * Creates entry `n` if it is still free (the caller saw n - 1 as the newest): false when
   * another writer created it first. Compare-and-append: the way to change state kept here.
   */
  async tryAppend(n: number, body: T): Promise<boolean> {
    const created = await this.store.putIfAbsent(this.key(n), JSON.stringify(body));
    this.known = Math.max(this.known, n);
    if (created && n % HINT_EVERY === 0) await this.store.put(`${this.prefix}head.json`, JSON.stringify({ n }));
    return created;
  }

  /** Appends after whatever is newest, however many writers race; returns the entry's number. */
  async append(body: T): Promise<number> {
    let n = (await this.head()) + 1;
    for (let tries = 0; ; tries++) {
      if (await this.tryAppend(n, body)) return n;
      // n exists now: n + 1 is the next candidate; after a few refusals, list to catch up.
      n = tries < 3 ? n + 1 : (await this.head()) + 1;
    }
  }

  /**
   * Deletes entries last modified before `beforeMs`, never the newest one. Returns the number
   * of entries deleted.
   */
  async prune(beforeMs: number): Promise<number> {
    const all = await this.numbersAfter(0);
    const old = all.slice(0, -1).filter((e) => e.lastModified.getTime() < beforeMs);
    await this.store.delete(old.map((e) => this.key(e.n)));
    return old.length;
  }

  /** The oldest number kept (0 when empty). */
  async first(): Promise<number> {
    for await (const info of this.store.list({ prefix: this.prefix })) {
      const n = this.numberOf(info.key);
      if (n !== undefined) return n;
    }
    return 0;
  }
}
