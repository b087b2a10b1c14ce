// A consumer's place in the event log, kept in the object store so that it survives restarts
// and is shared by every worker: an ObjectSequence of states under events/v1/consumers/<name>/.
// A state is never rewritten; the next one is appended with a conditional PUT, which is how two
// workers agree without a lock service: whoever creates entry n + 1 first holds the batch
// (a lease, so a dead holder's batch is taken over once it runs out), and a holder whose lease
// ran out can no longer record an outcome over its successor's. At least once, never lost:
// events are marked done only after they were delivered.
import type { ObjectStore } from '../store/objectStore.js';
import { ObjectSequence } from './sequence.js';

export const CONSUMERS_PREFIX = 'events/v1/consumers/';

export interface CursorState {
  /** Events up to this id are done (delivered, filtered out or set aside). */
  upto: number;
  /** The batch under way: the same range (so the same event id) on every attempt. */
  pending?: {
    to: number;
    firstAttemptMs: number;
    attempts: number;
    nextAttemptMs: number;
    lastError?: string;
  };
  /** Who sends the pending batch now, until when. */
  lease?: { holder: string; untilMs: number };
}

export class DurableCursor {
  private readonly seq: ObjectSequence<CursorState>;

  constructor(
    store: ObjectStore,
    readonly name: string,
    private readonly initial: () => Promise<CursorState>,
  ) {
    this.seq = new ObjectSequence(store, `${CONSUMERS_PREFIX}${name}/`);
  }

  /** The newest state and its number (0 and the initial state for a new consumer). */
  async current(): Promise<{ n: number; state: CursorState }> {
    for (;;) {
      const n = await this.seq.head();
      if (n === 0) return { n, state: await this.initial() };
      const state = await this.seq.get(n);
      if (state) return { n, state };
      // Pruned between the listing and the read (a newer one exists), or every state removed
      // with its subscription: listed again from the start, which tells them apart. Without it,
      // a removed consumer's worker read the same missing state for ever.
      this.seq.forget();
      if ((await this.seq.head()) === 0) throw new Error(`consumer ${this.name} has no state left: it was removed`);
    }
  }

  /** Appends the state that follows entry `n`; false when another worker got there first. */
  async advance(n: number, state: CursorState): Promise<boolean> {
    return this.seq.tryAppend(n + 1, state);
  }

  /** Drops states older than `beforeMs`, keeping the newest. */
  async prune(beforeMs: number): Promise<number> {
    return this.seq.prune(beforeMs);
  }

  /** Removes every state (the consumer is gone). */
  async drop(store: ObjectStore): Promise<void> {
    const keys: string[] = [];
    for (const e of await this.seq.numbersAfter(0)) keys.push(this.seq.key(e.n));
    await store.delete([...keys, `${this.seq.prefix}head.json`]);
  }
}

/** Exponential backoff with ±20 % jitter, capped. */
export function backoffMs(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempts, 20)) * (0.8 + Math.random() * 0.4);
}
