// Admission of heavy answers (whole archive windows, in any format): at most `max` at once, so
// the ones under way share DuckDB's memory limit and temp space instead of exhausting them
// together. One more waits its turn in a queue for at most `queueMs`, then gets a 503 with
// Retry-After before any byte, instead of a failure halfway through its answer.
import { OverloadedError } from '../shared/errors.js';

export class Admission {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    readonly max: number,
    private readonly queueMs: number,
  ) {}

  /** Answers under way, and waiting for their turn. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /**
   * Waits for a turn; resolves with the function that gives it back (once, whatever happens).
   * Fails with OverloadedError past the queue's wait, or with `signal`'s reason when the
   * client leaves while waiting.
   */
  async enter(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.running < this.max) {
      this.running += 1;
      return this.leaver();
    }
    await new Promise<void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', leave);
        resolve();
      };
      const drop = (err: unknown) => {
        const at = this.waiting.indexOf(turn);
        if (at >= 0) this.waiting.splice(at, 1);
        clearTimeout(timer);
        signal?.removeEventListener('abort', leave);
        reject(err);
      };
      const leave = () => drop(signal?.reason);
      const timer = setTimeout(() => drop(new OverloadedError(`The archive is answering ${this.max} large requests already`)), this.queueMs);
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(turn);
    });
    // The turn was handed over by the answer that left: `running` already counts it.
    return this.leaver();
  }

  private leaver(): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    };
  }
}
