// Steps log consumers in a worker process, apart from the archive: each consumer at most one
// step at a time, `concurrency` at once, so a slow or dead endpoint holds only its own consumer.
// The set of consumers is read again every few seconds (webhook subscriptions come and go).
import type { Logger } from '../shared/log.js';
import type { LogConsumer } from './consumer.js';

const POLL_MS = 250;

export interface RunnerOptions {
  concurrency: number;
  /** The consumers to step now (called every `refreshMs`). */
  consumers(): Promise<LogConsumer[]>;
  refreshMs: number;
  /** Housekeeping every ten minutes (pruning the log and cursors). */
  housekeeping?(): Promise<void>;
}

export class ConsumerRunner {
  private running = false;
  private loopDone: Promise<void> | undefined;
  private readonly inFlight = new Map<string, Promise<void>>();
  private wakeUp: (() => void) | undefined;
  private list: LogConsumer[] = [];
  private listedAt = -Infinity;
  /** Where the next round of the list starts. */
  private nextAt = 0;
  private housekeptAt = 0;

  constructor(
    private readonly options: RunnerOptions,
    private readonly log: Logger,
    private readonly what: string,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Stops stepping and waits for the steps under way (each send is bounded by its timeout). */
  async stop(): Promise<void> {
    this.running = false;
    this.wakeUp?.();
    await this.loopDone;
    await Promise.all(this.inFlight.values());
  }

  private async loop(): Promise<void> {
    while (this.running) {
      try {
        const now = Date.now();
        if (now - this.listedAt >= this.options.refreshMs) {
          this.list = await this.options.consumers();
          this.listedAt = now;
        }
        if (this.options.housekeeping && now - this.housekeptAt >= 600_000) {
          this.housekeptAt = now;
          this.options.housekeeping().catch((err: unknown) => this.log.warn({ err: String(err) }, `${this.what}: housekeeping failed`));
        }
        // Round the list from after the last consumer given a slot: a free slot goes to the next
        // one in turn, so consumers early in the list that always have work cannot keep every slot.
        const n = this.list.length;
        const start = this.nextAt;
        for (let k = 0; k < n; k++) {
          if (this.inFlight.size >= this.options.concurrency) break;
          const at = (start + k) % n;
          const c = this.list[at]!;
          const name = c.spec.cursor.name;
          if (this.inFlight.has(name)) continue;
          const p = this.drain(c).finally(() => {
            this.inFlight.delete(name);
          });
          this.inFlight.set(name, p);
          this.nextAt = at + 1;
        }
      } catch (err) {
        this.log.warn({ err: String(err) }, `${this.what}: step failed; retrying`);
      }
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, POLL_MS);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
  }

  /** Steps one consumer while it has work it can do now. */
  private async drain(c: LogConsumer): Promise<void> {
    try {
      for (let i = 0; i < 100 && this.running; i++) {
        const r = await c.step();
        if (r !== 'sent' && r !== 'skipped') break;
      }
    } catch (err) {
      this.log.warn({ consumer: c.spec.cursor.name, err: String(err) }, `${this.what}: step failed; retrying`);
    }
  }
}
