// Admission of heavy answers (whole archive windows, in any format): at most `max` at once, so
// the ones under way share DuckDB's memory limit and temp space instead of exhausting them
// together, and at most `perClient` of them for one client address, so one client (however
// slowly it reads) cannot hold every turn while others wait. One more waits its turn in a queue
// for at most `queueMs`, then is refused before any byte with Retry-After: a 503 when the
// process is busy, a 429 when only its own address's answers kept it waiting.
import { HttpError, OverloadedError } from '../shared/errors.js';

interface Waiter {
  client: string;
  grant: () => void;
}

export class Admission {
  private running = 0;
  /** Turns held, by client. */
  private readonly held = new Map<string, number>();
  private readonly waiting: Waiter[] = [];

  constructor(
    readonly max: number,
    readonly perClient: number,
    private readonly queueMs: number,
  ) {}

  /** Answers under way, and waiting for their turn. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /**
   * Waits for a turn for `client`; resolves with the function that gives it back (once, whatever
   * happens). Fails past the queue's wait (OverloadedError, or a 429 if the client's own share
   * was what it waited for), or with `signal`'s reason when the client leaves while waiting.
   */
  async enter(client: string, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.mayRun(client)) {
      this.take(client);
      return this.leaver(client);
    }
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        client,
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', leave);
          resolve();
        },
      };
      const drop = (err: unknown) => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        clearTimeout(timer);
        signal?.removeEventListener('abort', leave);
        reject(err);
      };
      const leave = () => drop(signal?.reason);
      const timer = setTimeout(() => drop(this.refusal(client)), this.queueMs);
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(waiter);
    });
    // The turn was taken for it by the answer that left (dispatch).
    return this.leaver(client);
  }

  private mayRun(client: string): boolean {
    return this.running < this.max && (this.held.get(client) ?? 0) < this.perClient;
  }

  private take(client: string): void {
    this.running += 1;
    this.held.set(client, (this.held.get(client) ?? 0) + 1);
  }

  /** Why a waiter gets no turn: the process is full (503), or only its own share is (429). */
  private refusal(client: string): Error {
    if (this.running < this.max && (this.held.get(client) ?? 0) >= this.perClient) {
      const seconds = String(Math.max(1, Math.ceil(this.queueMs / 1000)));
      return new HttpError(429, `This address already has ${this.perClient} whole-window answers under way on this server; wait for one to end, or page with limit.`, [], { 'Retry-After': seconds });
    }
    return new OverloadedError(`The archive is answering ${this.max} large requests already`);
  }

  private leaver(client: string): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.running -= 1;
      const n = (this.held.get(client) ?? 1) - 1;
      if (n > 0) this.held.set(client, n);
      else this.held.delete(client);
      this.dispatch();
    };
  }

  /** Turns to the longest waiting whose clients are under their share: one at its share waits on, not the others behind it. */
  private dispatch(): void {
    for (let i = 0; i < this.waiting.length && this.running < this.max; ) {
      const waiter = this.waiting[i]!;
      if (!this.mayRun(waiter.client)) {
        i += 1;
        continue;
      }
      this.waiting.splice(i, 1);
      this.take(waiter.client);
      waiter.grant();
    }
  }
}
