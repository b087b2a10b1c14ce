// In-process queue for the embedded default. It holds no durable state:
// every message it carries is backed by a pending marker in the object store,
// so a restart loses nothing (reconciliation re-enqueues at start-up).
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
  private readonly entries = new Map<string, Entry>();
  private waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly options: { maxReceives: number; deadLetter: DeadLetterSink },
  ) {}

  async send(bodies: readonly string[]): Promise<void> {
    for (const body of bodies) {
      const id = randomUUID();
      this.entries.set(id, { id, body, receipt: '', receiveCount: 0, visibleAt: 0 });
    }
    this.wake();
  }

  async receive(options: ReceiveOptions): Promise<QueueMessage[]> {
    const deadline = Date.now() + options.waitSeconds * 1000;
    for (;;) {
      const out = await this.take(options);
      if (out.length > 0 || this.closed || Date.now() >= deadline) return out;
      await this.waitFor(Math.min(deadline - Date.now(), this.nextVisibleIn()));
    }
  }

  private async take(options: ReceiveOptions): Promise<QueueMessage[]> {
    const now = Date.now();
    const out: QueueMessage[] = [];
    for (const entry of this.entries.values()) {
      if (out.length >= options.maxMessages) break;
      if (entry.visibleAt > now) continue;
      entry.receiveCount += 1;
      if (entry.receiveCount > this.options.maxReceives) {
        // As SQS's redrive policy: moved aside on the delivery past the limit.
        this.entries.delete(entry.id);
        await this.options.deadLetter({ id: entry.id, body: entry.body, receiveCount: entry.receiveCount - 1 });
        continue;
      }
      entry.receipt = randomUUID();
      entry.visibleAt = now + options.visibilitySeconds * 1000;
      out.push({ id: entry.id, body: entry.body, receipt: entry.receipt, receiveCount: entry.receiveCount });
    }
    return out;
  }

  async delete(receipts: readonly string[]): Promise<void> {
    const wanted = new Set(receipts);
    for (const entry of this.entries.values()) {
      if (wanted.has(entry.receipt)) this.entries.delete(entry.id);
    }
  }

  async changeVisibility(receipt: string, seconds: number): Promise<void> {
    for (const entry of this.entries.values()) {
      if (entry.receipt === receipt) entry.visibleAt = Date.now() + seconds * 1000;
    }
    this.wake();
  }

  async depth(): Promise<QueueDepth> {
    const now = Date.now();
    let visible = 0;
    for (const entry of this.entries.values()) if (entry.visibleAt <= now) visible += 1;
    return { visible, inFlight: this.entries.size - visible };
  }

  async ping(): Promise<void> {}

  close(): void {
    this.closed = true;
    this.wake();
  }

  private nextVisibleIn(): number {
    let next = Infinity;
    for (const entry of this.entries.values()) next = Math.min(next, entry.visibleAt - Date.now());
    return Math.max(10, next);
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
