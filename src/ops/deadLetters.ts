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
    return this.queue.deadLetters().map((d) => ({ id: String(d.id), body: d.body }));
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

  /** Receives everything visible, hiding each message while we hold it. */
  private async drain(visibility: number): Promise<{ id: string; body: string; receipt: string }[]> {
    const url = await this.dlqUrl();
    const out: { id: string; body: string; receipt: string }[] = [];
    for (;;) {
      const got = await this.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: 0 }),
      );
      const messages = got.Messages ?? [];
      if (messages.length === 0) return out;
      out.push(...messages.map((m) => ({ id: m.MessageId ?? '', body: m.Body ?? '', receipt: m.ReceiptHandle ?? '' })));
    }
  }

  async list(): Promise<DeadLetter[]> {
    const held = await this.drain(30);
    const url = await this.dlqUrl();
    // Listing must not hide them: make them visible again at once.
    for (let i = 0; i < held.length; i += 10) {
      await this.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: url,
          Entries: held.slice(i, i + 10).map((m, n) => ({ Id: String(n), ReceiptHandle: m.receipt, VisibilityTimeout: 0 })),
        }),
      );
    }
    return held.map(({ id, body }) => ({ id, body }));
  }

  async redrive(): Promise<number> {
    const held = await this.drain(300);
    const url = await this.dlqUrl();
    for (let i = 0; i < held.length; i += 10) {
      const batch = held.slice(i, i + 10);
      await this.queue.send(batch.map((m) => m.body));
      await this.sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: url, Entries: batch.map((m, n) => ({ Id: String(n), ReceiptHandle: m.receipt })) }),
      );
    }
    return held.length;
  }
}
