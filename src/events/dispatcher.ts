// Sends queued webhook deliveries, apart from the archive: the worker only records events, and
// this loop POSTs them, at most one at a time per subscription and `concurrency` at once, each
// bounded by the webhook timeout. A failed delivery is retried with exponential backoff (with
// jitter, capped at an hour) until it is `retryForMs` old, then set aside for ops to redrive.
import type { EventsConfig } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import type { EventLog, DueDelivery } from './eventLog.js';
import { CLOUDEVENT_TYPE } from './events.js';
import type { HostPolicy } from './hostPolicy.js';
import { cloudEventBody, post, signedHeaders } from './webhook.js';

const IDLE_POLL_MS = 250;
const MAX_DELAY_MS = 3_600_000;

export interface DispatcherOptions extends Pick<EventsConfig, 'webhookTimeoutMs' | 'webhookRetryBaseMs' | 'webhookRetryForMs' | 'retentionMs'> {
  concurrency: number;
}

export class WebhookDispatcher {
  private running = false;
  private loopDone: Promise<void> | undefined;
  private readonly inFlight = new Map<string, Promise<void>>();
  private wakeUp: (() => void) | undefined;
  private prunedAt = 0;

  constructor(
    private readonly events: EventLog,
    private readonly policy: HostPolicy,
    private readonly options: DispatcherOptions,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.events.onRecorded = () => this.wake();
    this.loopDone = this.loop();
  }

  /** Stops taking deliveries and waits for those under way (each is bounded by the timeout). */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.loopDone;
    await Promise.all(this.inFlight.values());
  }

  wake(): void {
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      try {
        if (this.now() - this.prunedAt > 600_000) {
          this.prunedAt = this.now();
          this.events.prune(this.options.retentionMs);
        }
        const room = this.options.concurrency - this.inFlight.size;
        const due = room > 0 ? this.events.claimDue(room, this.options.webhookTimeoutMs + 30_000, new Set(this.inFlight.keys())) : [];
        for (const d of due) {
          const p = this.deliver(d)
            .catch((err: unknown) => this.log.error({ err: String(err), subscription: d.subscriptionId }, 'webhook delivery failed before it was sent; its claim lapses and it is tried again'))
            .finally(() => {
              this.inFlight.delete(d.subscriptionId);
              this.wake();
            });
          this.inFlight.set(d.subscriptionId, p);
        }
      } catch (err) {
        this.log.warn({ err: String(err) }, 'webhook dispatch step failed; retrying');
      }
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, IDLE_POLL_MS);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
  }

  private async deliver(d: DueDelivery): Promise<void> {
    const body = cloudEventBody({ id: d.id, type: CLOUDEVENT_TYPE[d.kind], timeMs: d.atMs }, d.features);
    const attempt = await post(d.url, body, signedHeaders(d.id, d.secret, body, this.now()), this.policy, this.options.webhookTimeoutMs);
    try {
      if (attempt.ok) {
        this.events.delivered(d.id);
        this.log.debug({ delivery: d.id, subscription: d.subscriptionId, reports: d.count, ms: attempt.ms }, 'webhook delivered');
        return;
      }
      const error = attempt.error ?? 'failed';
      const now = this.now();
      if (now - d.retryFromMs >= this.options.webhookRetryForMs) {
        this.events.setAside(d.id, error);
        this.log.warn({ delivery: d.id, subscription: d.subscriptionId, attempts: d.attempts + 1, error }, 'webhook delivery set aside');
        return;
      }
      const delay = Math.min(MAX_DELAY_MS, this.options.webhookRetryBaseMs * 2 ** Math.min(d.attempts, 20)) * (0.8 + Math.random() * 0.4);
      this.events.retryAt(d.id, Math.min(now + delay, d.retryFromMs + this.options.webhookRetryForMs), error);
      this.log.info({ delivery: d.id, subscription: d.subscriptionId, attempt: d.attempts + 1, retryInMs: Math.round(delay), error }, 'webhook delivery failed; will retry');
    } catch (err) {
      // The lease runs out and another pass takes it again: at least once.
      this.log.warn({ delivery: d.id, err: String(err) }, 'could not record a webhook outcome');
    }
  }
}

export type { DueDelivery };
