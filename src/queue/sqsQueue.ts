// Queue on SQS (or anything speaking its protocol). SDK errors become
// UnavailableError here; callers never see SDK types.
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { batchesBy } from '../shared/batches.js';
import { failureName, UnavailableError } from '../shared/errors.js';
import type { Queue, QueueDepth, QueueMessage, ReceiveOptions } from './queue.js';

/**
 * A JSON body as SQS takes it. SQS refuses a message holding a character outside XML's
 * (#x9, #xA, #xD, #x20–#xD7FF, #xE000–#xFFFD, #x10000–#x10FFFF), and a partner's title may hold
 * U+FFFE or U+FFFF: the only two JSON.stringify leaves raw (it escapes control characters and
 * lone surrogates). Escaped, they parse back to themselves; refused, the post got a 503 and its
 * retries found it accepted but never sent. Every body is JSON, where they can only be in strings.
 */
function sqsSafe(body: string): string {
  return body.replace(/[\uFFFE\uFFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/** What one SendMessageBatch may carry: ten messages, and 256 KiB of them in all (a queue's classic maximum). */
const BATCH_MESSAGES = 10;
const BATCH_BYTES = 256 * 1024;

/** Bodies in batches SQS takes: at most ten, and their bytes within the batch's total (a lone larger body alone). */
export function sendBatches(bodies: readonly string[]): string[][] {
  return batchesBy(bodies, BATCH_MESSAGES, BATCH_BYTES, (body) => Buffer.byteLength(body));
}

export class SqsQueue implements Queue {
  readonly description: string;
  private readonly abort = new AbortController();

  constructor(
    private readonly client: SQSClient,
    private readonly queueUrl: string,
  ) {
    this.description = queueUrl;
  }

  async send(bodies: readonly string[]): Promise<void> {
    for (const batch of sendBatches(bodies.map(sqsSafe))) {
      const out = await this.call(() =>
        this.client.send(
          new SendMessageBatchCommand({
            QueueUrl: this.queueUrl,
            Entries: batch.map((body, n) => ({ Id: String(n), MessageBody: body })),
          }),
        ),
      );
      if (out.Failed && out.Failed.length > 0) {
        throw new UnavailableError('queue', `queue refused ${out.Failed.length} messages (${out.Failed[0]?.Code})`);
      }
    }
  }

  async receive(options: ReceiveOptions): Promise<QueueMessage[]> {
    // One signal for this call, tied to both and untied after: AbortSignal.any() of two
    // long-lived signals keeps a little memory for each call on Node 20 (nodejs/node#55351).
    const sources = options.signal ? [this.abort.signal, options.signal] : [this.abort.signal];
    if (sources.some((s) => s.aborted)) return [];
    const call = new AbortController();
    const stop = () => call.abort();
    for (const s of sources) s.addEventListener('abort', stop, { once: true });
    const signal = call.signal;
    try {
      const out = await this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.queueUrl,
          MaxNumberOfMessages: Math.min(10, options.maxMessages),
          WaitTimeSeconds: Math.min(20, Math.ceil(options.waitSeconds)),
          VisibilityTimeout: Math.ceil(options.visibilitySeconds),
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        }),
        // A long poll is silent while it waits: its bound is the wait plus ten seconds.
        { abortSignal: signal, requestTimeout: (Math.min(20, Math.ceil(options.waitSeconds)) + 10) * 1000 },
      );
      return (out.Messages ?? []).map((m) => ({
        id: m.MessageId ?? '',
        body: m.Body ?? '',
        receipt: m.ReceiptHandle ?? '',
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1),
      }));
    } catch (err) {
      if (signal.aborted) return [];
      throw unavailable(err);
    } finally {
      for (const s of sources) s.removeEventListener('abort', stop);
    }
  }

  async delete(receipts: readonly string[]): Promise<void> {
    for (let i = 0; i < receipts.length; i += 10) {
      const batch = receipts.slice(i, i + 10);
      const out = await this.call(() =>
        this.client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.queueUrl,
            Entries: batch.map((ReceiptHandle, n) => ({ Id: String(n), ReceiptHandle })),
          }),
        ),
      );
      // A failed delete only means a redelivery, which the worker tolerates.
      void out;
    }
  }

  async extend(receipts: readonly string[], seconds: number): Promise<void> {
    for (let i = 0; i < receipts.length; i += BATCH_MESSAGES) {
      const batch = receipts.slice(i, i + BATCH_MESSAGES);
      // An entry refused (its receipt expired, or its message deleted) is passed over.
      await this.call(() =>
        this.client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.queueUrl,
            Entries: batch.map((ReceiptHandle, n) => ({ Id: String(n), ReceiptHandle, VisibilityTimeout: Math.ceil(seconds) })),
          }),
        ),
      );
    }
  }

  async changeVisibility(receipt: string, seconds: number): Promise<void> {
    await this.call(() =>
      this.client.send(
        new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: receipt, VisibilityTimeout: seconds }),
      ),
    );
  }

  async depth(): Promise<QueueDepth> {
    const out = await this.call(() =>
      this.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: this.queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      ),
    );
    return {
      visible: Number(out.Attributes?.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
    };
  }

  async ping(): Promise<void> {
    await this.depth();
  }

  close(): void {
    this.abort.abort();
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw unavailable(err);
    }
  }
}

function unavailable(err: unknown): UnavailableError {
  if (err instanceof UnavailableError) return err;
  return new UnavailableError('queue', `queue request failed (${failureName(err)})`, { cause: err });
}
