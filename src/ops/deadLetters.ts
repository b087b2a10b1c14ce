// The dead-letter queue, for ops: list what landed there and send it back.
// Embedded: the dead-letter table of the SQLite queue. SQS: the queue's DLQ.
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { deadLetterQueueName } from '../queue/settings.js';
import type { Queue } from '../queue/queue.js';
import { SqliteQueue } from '../queue/sqliteQueue.js';
import type { Config } from '../shared/config.js';

export interface DeadLetter {
  id: string;
  body: string;
  /** Embedded: how many times workers received it before it was set aside, and when that was. */
  receiveCount?: number;
  deadLetteredAt?: string;
  /** SQS: when it was first sent to the queue (SQS keeps that time as it moves a message). */
  sentAt?: string;
}

export interface DeadLetters {
  list(): Promise<DeadLetter[]>;
  /** Sends every dead letter back to the main queue; returns how many. */
  redrive(): Promise<number>;
}

/** What the dead-letter commands use: the queue, and on SQS its client and URL (the dead-letter queue is named after it). */
export interface DeadLetterDeps {
  queue: Queue;
  sqs: SQSClient | undefined;
  config: Pick<Config, 'queueUrl'>;
}

export function deadLettersFor(rt: DeadLetterDeps): DeadLetters {
  return rt.queue instanceof SqliteQueue ? new SqliteDeadLetters(rt.queue) : new SqsDeadLetters(rt.sqs!, rt.config.queueUrl, rt.queue);
}

class SqliteDeadLetters implements DeadLetters {
  constructor(private readonly queue: SqliteQueue) {}

  async list(): Promise<DeadLetter[]> {
    return this.queue.deadLetters().map((d) => ({ id: String(d.id), body: d.body, receiveCount: d.receiveCount, deadLetteredAt: d.deadLetteredAt }));
  }

  async redrive(): Promise<number> {
    return this.queue.redriveDeadLetters();
  }
}

class SqsDeadLetters implements DeadLetters {
  private url: string | undefined;

  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    private readonly queue: Queue,
  ) {}

  private async dlqUrl(): Promise<string> {
    const name = deadLetterQueueName(this.queueUrl.replace(/\/+$/, '').split('/').pop()!);
    this.url ??= (await this.sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl!;
    return this.url;
  }

  /**
   * Receives what is visible, `visibility` seconds hidden, a batch at a time to `take`: the
   * messages not seen before, and the receipts of those received again (their first hiding over,
   * or SQS delivering a copy), which are the live ones now. SQS samples some of its servers on each
   * receive: an empty answer is not an empty queue, so only a few in a row end it, each waiting a
   * second for what the others hold.
   */
  private async drain(visibility: number, take: (fresh: HeldLetter[], again: HeldLetter[]) => Promise<void>): Promise<number> {
    const url = await this.dlqUrl();
    const seen = new Set<string>();
    for (let empty = 0; empty < EMPTY_RECEIVES; ) {
      const got = await this.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['SentTimestamp'] }),
      );
      const batch = (got.Messages ?? []).map((m) => ({ id: m.MessageId ?? '', body: m.Body ?? '', receipt: m.ReceiptHandle ?? '', sentAt: sentAt(m.Attributes?.SentTimestamp) }));
      const fresh = batch.filter((m) => !seen.has(m.id));
      const again = batch.filter((m) => seen.has(m.id));
      empty = fresh.length === 0 ? empty + 1 : 0;
      for (const m of fresh) seen.add(m.id);
      if (batch.length > 0) await take(fresh, again);
    }
    return seen.size;
  }

  async list(): Promise<DeadLetter[]> {
    const held = new Map<string, HeldLetter>();
    // Hidden while they are listed (so each comes once), then visible again at once, by the
    // receipt each was last received with.
    await this.drain(60, async (fresh, again) => {
      for (const m of [...fresh, ...again]) held.set(m.id, held.has(m.id) ? { ...held.get(m.id)!, receipt: m.receipt } : m);
    });
    const url = await this.dlqUrl();
    const letters = [...held.values()];
    for (let i = 0; i < letters.length; i += 10) {
      await this.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: url,
          Entries: letters.slice(i, i + 10).map((m, n) => ({ Id: String(n), ReceiptHandle: m.receipt, VisibilityTimeout: 0 })),
        }),
      );
    }
    return letters.map(({ id, body, sentAt }) => ({ id, body, ...(sentAt !== undefined && { sentAt }) }));
  }

  async redrive(): Promise<number> {
    const url = await this.dlqUrl();
    // Each batch sent back and deleted as it comes, while its receipts are fresh; as
    // redeliveries, so the worker drops one whose report was archived meanwhile. A copy received
    // again is deleted, not sent twice.
    return this.drain(300, async (fresh, again) => {
      if (fresh.length > 0) await this.queue.send(fresh.map((m) => asRedelivery(m.body)));
      const done = [...fresh, ...again];
      await this.sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: done.map((m, n) => ({ Id: String(n), ReceiptHandle: m.receipt })) }));
    });
  }
}

interface HeldLetter {
  id: string;
  body: string;
  receipt: string;
  sentAt: string | undefined;
}

/** SQS's SentTimestamp (epoch ms, as text) as an ISO time. */
function sentAt(ms: string | undefined): string | undefined {
  const n = Number(ms);
  return ms !== undefined && Number.isFinite(n) && n > 0 ? new Date(n).toISOString() : undefined;
}

/** Empty receives in a row that end a drain of the dead-letter queue. */
const EMPTY_RECEIVES = 3;

/** A dead letter's body sent back as a redelivery (an ingest message), or as it was (anything else). */
function asRedelivery(body: string): string {
  try {
    const envelope = JSON.parse(body) as unknown;
    if (envelope && typeof envelope === 'object' && (envelope as { v?: unknown }).v === 1 && typeof (envelope as { pkey?: unknown }).pkey === 'string') {
      return JSON.stringify({ ...envelope, redelivery: true });
    }
  } catch {
    // not JSON: a poison message goes back as it came
  }
  return body;
}
