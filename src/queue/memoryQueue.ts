// In-process queue for the embedded default. It holds no durable state:
// every message it carries is backed by a pending marker in the object store,
// so a restart loses nothing (reconciliation re-enqueues at start-up).
//
// Visible messages wait in a FIFO; received ones sit in a hidden set until
// deleted or until their visibility timeout passes. Receiving costs O(batch),
// however many messages are in flight (a worker buffers thousands).
import { randomUUID } from 'node:crypto';
import type { Queue, QueueDepth, QueueMessage, ReceiveOptions } from './queue.js';

interface Entry {
  id: string;
  body: string;
  receipt: string;
  receiveCount: number;
  visibleAt: number;
}

export type DeadLetterSink = (message: { id: string; body: string; receiveCount: number }) => Promise<void>;

export class MemoryQueue implements Queue {
  readonly description = 'in-process queue';
  readonly durable = false;
  private ready: Entry[] = [];
  private readyHead = 0;
  /** Received, not deleted, by receipt. */
  private readonly hidden = new Map<string, Entry>();
  /** Earliest visibleAt among hidden entries. */
  private nextReturn = Infinity;
  /** Messages on their way to the dead-letter sink. */
  private deadLettering = 0;
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(private readonly options: { maxReceives: number; deadLetter: DeadLetterSink }) {}

  async send(bodies: readonly string[]): Promise<void> {
    for (const body of bodies) this.ready.push({ id: randomUUID(), body, receipt: '', receiveCount: 0, visibleAt: 0 });
    this.wake();
  }

  async receive(options: ReceiveOptions): Promise<QueueMessage[]> {
    const deadline = Date.now() + options.waitSeconds * 1000;
    for (;;) {
      const out = await this.take(options);
      if (out.length > 0 || this.closed || Date.now() >= deadline) return out;
      await this.waitFor(Math.min(deadline - Date.now(), Math.max(10, this.nextReturn - Date.now())));
    }
  }

  private async take(options: ReceiveOptions): Promise<QueueMessage[]> {
    const now = Date.now();
    if (now >= this.nextReturn) this.returnExpired(now);
    const out: QueueMessage[] = [];
    while (out.length < options.maxMessages && this.readyHead < this.ready.length) {
      const entry = this.ready[this.readyHead++]!;
      entry.receiveCount += 1;
      if (entry.receiveCount > this.options.maxReceives) {
        // As SQS's redrive policy: moved aside on the delivery past the limit. Counted as in
        // flight until it is stored, and put back in line if storing it fails.
        this.deadLettering += 1;
        try {
          await this.options.deadLetter({ id: entry.id, body: entry.body, receiveCount: entry.receiveCount - 1 });
        } catch (err) {
          entry.receiveCount -= 1;
          this.ready.push(entry);
          throw err;
        } finally {
          this.deadLettering -= 1;
        }
        continue;
      }
      entry.receipt = randomUUID();
      entry.visibleAt = now + options.visibilitySeconds * 1000;
      this.hidden.set(entry.receipt, entry);
      this.nextReturn = Math.min(this.nextReturn, entry.visibleAt);
      out.push({ id: entry.id, body: entry.body, receipt: entry.receipt, receiveCount: entry.receiveCount });
    }
    // Drop the consumed front of the FIFO now and then, not on every receive.
    if (this.readyHead > 1024 && this.readyHead * 2 > this.ready.length) {
      this.ready = this.ready.slice(this.readyHead);
      this.readyHead = 0;
    }
    return out;
  }

  /** Hidden messages whose visibility timeout passed go back to the front of the line. */
  private returnExpired(now: number): void {
    const back: Entry[] = [];
    let next = Infinity;
    for (const [receipt, entry] of this.hidden) {
      if (entry.visibleAt <= now) {
        this.hidden.delete(receipt);
        back.push(entry);
      } else if (entry.visibleAt < next) {
        next = entry.visibleAt;
      }
    }
    this.nextReturn = next;
    if (back.length > 0) {
      this.ready = [...back, ...this.ready.slice(this.readyHead)];
      this.readyHead = 0;
    }
  }

  async delete(receipts: readonly string[]): Promise<void> {
    for (const receipt of receipts) this.hidden.delete(receipt);
  }

  async changeVisibility(receipt: string, seconds: number): Promise<void> {
    const entry = this.hidden.get(receipt);
    if (!entry) return;
    entry.visibleAt = Date.now() + seconds * 1000;
    this.nextReturn = Math.min(this.nextReturn, entry.visibleAt);
    this.wake();
  }

  async depth(): Promise<QueueDepth> {
    const now = Date.now();
    let returning = 0;
    for (const entry of this.hidden.values()) if (entry.visibleAt <= now) returning += 1;
    return { visible: this.ready.length - this.readyHead + returning, inFlight: this.hidden.size - returning + this.deadLettering };
  }

  async ping(): Promise<void> {}

  close(): void {
    this.closed = true;
    this.wake();
  }

  private waitFor(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.waiters.add(done);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
