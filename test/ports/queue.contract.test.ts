// One contract, every adapter: the SQLite queue and SQS (fauxqs) must agree.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { bootstrap } from '../../src/main/bootstrap.js';
import { deadLettersFor } from '../../src/ops/deadLetters.js';
import { deadLetterQueueName } from '../../src/queue/settings.js';
import { UnavailableError } from '../../src/shared/errors.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import type { Queue } from '../../src/queue/queue.js';
import { sendBatches, SqsQueue } from '../../src/queue/sqsQueue.js';
import { randomBytes } from 'node:crypto';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
import { tempDir, testConfig } from '../support/env.js';

let emulator: Emulator;
let moto: Emulator | undefined;
let lean: Emulator | undefined;
beforeAll(async () => {
  emulator = await startEmulator();
  if (HAS_MOTO) [moto, lean] = await Promise.all([startMoto(), startMoto({ lean: true })]);
});
afterAll(async () => {
  await emulator.stop();
  await moto?.stop();
  await lean?.stop();
});
if (!HAS_MOTO) console.warn(MOTO_MISSING);

/** An SQS queue and its dead-letter queue made by bootstrap, on a peer. */
/** A new queue of moto's, named as moto names queues (after its default account). */
const motoQueue = (e: Emulator) => ({ QUEUE_URL: e.queueUrl(`reports-${randomBytes(4).toString('hex')}`) });

const sqsQueue = (peer: () => Emulator, env: (e: Emulator) => Record<string, string>) => async (): Promise<Made> => {
  const config = await testConfig('aws', peer(), env(peer()));
  const boot = await bootstrap(config, { s3: peer().s3, sqs: peer().sqs });
  const queue = new SqsQueue(peer().sqs, config.queueUrl);
  return {
    queue,
    deadLetters: async () => {
      const out = await peer().sqs.send(new ReceiveMessageCommand({ QueueUrl: boot.deadLetterQueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
      return (out.Messages ?? []).map((m) => m.Body ?? '');
    },
  };
};

interface Made {
  queue: Queue;
  deadLetters: () => Promise<string[]>;
}

const adapters: { name: string; make: () => Promise<Made> }[] = [
  {
    name: 'sqlite',
    make: async () => {
      const queue = new SqliteQueue(openLedgerDb(await tempDir()), 5);
      return { queue, deadLetters: async () => queue.deadLetters().map((d) => d.body) };
    },
  },
  { name: 'sqs (fauxqs)', make: sqsQueue(() => emulator, () => ({})) },
  ...(HAS_MOTO ? [{ name: 'sqs (moto)', make: sqsQueue(() => moto!, motoQueue) }] : []),
  // The benchmarks' moto (visibility and delay read from one clock) keeps the contract too.
  ...(HAS_MOTO ? [{ name: 'sqs (moto_lean)', make: sqsQueue(() => lean!, motoQueue) }] : []),
];

const receive = (q: Queue, visibilitySeconds = 30) => q.receive({ maxMessages: 10, waitSeconds: 1, visibilitySeconds });

describe.each(adapters)('queue contract: $name', ({ make }) => {
  it('delivers what was sent, and a deleted message does not come back', async () => {
    const { queue } = await make();
    const bodies = Array.from({ length: 13 }, (_, i) => `m${i}`);
    await queue.send(bodies);
    const got: string[] = [];
    for (let i = 0; i < 5 && got.length < 13; i++) {
      const batch = await receive(queue);
      got.push(...batch.map((m) => m.body));
      expect(batch.every((m) => m.receiveCount === 1)).toBe(true);
      await queue.delete(batch.map((m) => m.receipt));
    }
    expect(got.sort()).toEqual([...bodies].sort());
    expect(await queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 })).toEqual([]);
    queue.close();
  });

  it('delivers large messages sent together, more bytes than one batch of SQS takes (256 KiB)', async () => {
    const { queue } = await make();
    const bodies = Array.from({ length: 10 }, (_, i) => JSON.stringify({ i, text: 'x'.repeat(60_000) }));
    await queue.send(bodies);
    const got: string[] = [];
    for (let i = 0; i < 10 && got.length < 10; i++) {
      const batch = await receive(queue);
      got.push(...batch.map((m) => m.body));
      await queue.delete(batch.map((m) => m.receipt));
    }
    expect(got.map((b) => JSON.parse(b).i).sort((a, b) => a - b)).toEqual(bodies.map((_, i) => i));
    queue.close();
  });

  it('hides a received message until its visibility timeout, then redelivers it with a higher count', async () => {
    const { queue } = await make();
    await queue.send(['once']);
    const [first] = await receive(queue, 1);
    expect(first?.body).toBe('once');
    expect(await queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 1 })).toEqual([]);
    const again = await queue.receive({ maxMessages: 10, waitSeconds: 3, visibilitySeconds: 30 });
    expect(again.map((m) => m.body)).toEqual(['once']);
    expect(again[0]!.receiveCount).toBe(2);
    queue.close();
  });

  it('extend keeps received messages hidden past their visibility timeout, passing over a receipt no longer valid', async () => {
    const { queue } = await make();
    await queue.send(['held', 'gone']);
    const got = await queue.receive({ maxMessages: 10, waitSeconds: 1, visibilitySeconds: 1 });
    expect(got.map((m) => m.body).sort()).toEqual(['gone', 'held']);
    const held = got.find((m) => m.body === 'held')!;
    const gone = got.find((m) => m.body === 'gone')!;
    await queue.delete([gone.receipt]);
    await queue.extend([held.receipt, gone.receipt], 30);
    // Past the first second: still hidden.
    expect(await queue.receive({ maxMessages: 10, waitSeconds: 3, visibilitySeconds: 30 })).toEqual([]);
    await queue.delete([held.receipt]);
    queue.close();
  });

  it('changeVisibility(0) makes a message available at once', async () => {
    const { queue } = await make();
    await queue.send(['retry-me']);
    const [m] = await receive(queue, 60);
    await queue.changeVisibility(m!.receipt, 0);
    const again = await receive(queue, 60);
    expect(again.map((x) => x.body)).toEqual(['retry-me']);
    queue.close();
  });

  it('moves a message received more than 5 times to the dead-letter queue', async () => {
    const { queue, deadLetters } = await make();
    await queue.send(['poison']);
    for (let i = 0; i < 5; i++) {
      const batch = await receive(queue, 60);
      expect(batch.map((m) => m.body)).toEqual(['poison']);
      await queue.changeVisibility(batch[0]!.receipt, 0);
    }
    expect(await receive(queue, 60)).toEqual([]);
    expect(await deadLetters()).toEqual(['poison']);
    queue.close();
  });

  it('ends a long poll with no messages as soon as its signal aborts', async () => {
    const { queue } = await make();
    const stop = new AbortController();
    const started = Date.now();
    const polling = queue.receive({ maxMessages: 10, waitSeconds: 10, visibilitySeconds: 1, signal: stop.signal });
    setTimeout(() => stop.abort(), 200);
    expect(await polling).toEqual([]);
    // Well short of the 10 s wait (a generous bound for a loaded machine).
    expect(Date.now() - started).toBeLessThan(5_000);
    // Nothing is lost: on SQS the abandoned poll may still take a message on the server,
    // which then comes back after that poll's visibility timeout.
    await queue.send(['after']);
    expect((await queue.receive({ maxMessages: 10, waitSeconds: 4, visibilitySeconds: 30 })).map((m) => m.body)).toEqual(['after']);
    queue.close();
  });
});

describe('bootstrap', () => {
  it('creates the queue with a redrive policy to its dead-letter queue, and can run twice', async () => {
    const config = await testConfig('aws', emulator);
    const first = await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    const second = await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    expect(second).toEqual(first);
    expect(first.deadLetterQueueUrl).toMatch(new RegExp(`${deadLetterQueueName('reports-')}|-dlq$`));
    const attrs = await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: config.queueUrl, AttributeNames: ['All'] }));
    const dlqAttrs = await emulator.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: first.deadLetterQueueUrl, AttributeNames: ['QueueArn'] }),
    );
    expect(JSON.parse(attrs.Attributes!.RedrivePolicy!)).toEqual({
      deadLetterTargetArn: dlqAttrs.Attributes!.QueueArn,
      maxReceiveCount: 5,
    });
    expect(Number(attrs.Attributes!.VisibilityTimeout)).toBeGreaterThan(config.flushIntervalSeconds);
    expect(attrs.Attributes!.MessageRetentionPeriod).toBe(String(14 * 24 * 3600));
  });

  it('creates the queue with QUEUE_VISIBILITY_SECONDS as its visibility timeout where it is set', async () => {
    const config = await testConfig('aws', emulator, { FLUSH_INTERVAL_SECONDS: '1', QUEUE_VISIBILITY_SECONDS: '7' });
    await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    const attrs = await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: config.queueUrl, AttributeNames: ['VisibilityTimeout'] }));
    expect(attrs.Attributes!.VisibilityTimeout).toBe('7');
  });

  it('an unreachable SQS endpoint becomes UnavailableError', async () => {
    const other = await startEmulator();
    const config = await testConfig('aws', other);
    await bootstrap(config, { s3: other.s3, sqs: other.sqs });
    const queue = new SqsQueue(other.sqs, config.queueUrl);
    await other.stop();
    await expect(queue.send(['x'])).rejects.toBeInstanceOf(UnavailableError);
    await expect(queue.ping()).rejects.toBeInstanceOf(UnavailableError);
  });
});

describe('the SQLite queue across processes', () => {
  it('is one queue for every connection on the directory: each message goes to one consumer, a delete is seen by all', async () => {
    const dir = await tempDir();
    const producer = new SqliteQueue(openLedgerDb(dir), 5);
    const consumers = [new SqliteQueue(openLedgerDb(dir), 5), new SqliteQueue(openLedgerDb(dir), 5)];
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`);
    await producer.send(bodies);
    const got: string[] = [];
    for (let round = 0; round < 10 && got.length < bodies.length; round++) {
      const batches = await Promise.all(consumers.map((c) => c.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 })));
      for (const [i, batch] of batches.entries()) {
        got.push(...batch.map((m) => m.body));
        await consumers[(i + 1) % 2]!.delete(batch.map((m) => m.receipt));
      }
    }
    expect(got.sort()).toEqual([...bodies].sort());
    expect(await producer.depth()).toEqual({ visible: 0, inFlight: 0 });
  });

  it('wakes a waiting receive when another connection sends', async () => {
    const dir = await tempDir();
    const waiting = new SqliteQueue(openLedgerDb(dir), 5).receive({ maxMessages: 10, waitSeconds: 5, visibilitySeconds: 30 });
    setTimeout(() => void new SqliteQueue(openLedgerDb(dir), 5).send(['late']), 300);
    expect((await waiting).map((m) => m.body)).toEqual(['late']);
  });

  it('receives and deletes without an fsync of their own, and leaves every other write on the connection durable on commit', async () => {
    const db = openLedgerDb(await tempDir());
    const queue = new SqliteQueue(db, 5);
    const FULL = 2;
    await queue.send(['a', 'b']);
    const got = await queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 });
    expect(db.pragma('synchronous', { simple: true })).toBe(FULL);
    await queue.delete(got.map((m) => m.receipt));
    expect(db.pragma('synchronous', { simple: true })).toBe(FULL);
    expect(await queue.depth()).toEqual({ visible: 0, inFlight: 0 });
    // A receive that fails (the database went away) restores it too.
    db.exec('DROP TABLE queue');
    await expect(queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 })).rejects.toBeInstanceOf(UnavailableError);
    expect(db.pragma('synchronous', { simple: true })).toBe(FULL);
  });
});

describe('SQS send batches', () => {
  it('hold at most ten messages and 256 KiB of them, in the order sent', () => {
    const sizes = (batches: string[][]) => batches.map((b) => b.reduce((n, body) => n + Buffer.byteLength(body), 0));
    const large = Array.from({ length: 10 }, (_, i) => `${i}${'é'.repeat(30_000)}`);
    const batches = sendBatches(large);
    expect(batches.flat()).toEqual(large);
    expect(Math.max(...sizes(batches))).toBeLessThanOrEqual(256 * 1024);
    expect(batches.map((b) => b.length)).toEqual([4, 4, 2]);
    expect(sendBatches(Array.from({ length: 23 }, (_, i) => `m${i}`)).map((b) => b.length)).toEqual([10, 10, 3]);
    // A body larger than a batch's bytes goes alone (SQS judges it).
    expect(sendBatches(['a', 'x'.repeat(300_000), 'b']).map((b) => b.length)).toEqual([1, 1, 1]);
  });
});

describe('SQS message bodies', () => {
  it('hold only the characters SQS accepts, and parse back to what was sent', async () => {
    const config = await testConfig('aws', emulator, {});
    await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    const queue = new SqsQueue(emulator.sqs, config.queueUrl);
    // A partner's title with the two characters JSON.stringify leaves raw that SQS refuses.
    const record = { title: 'Baha \uFFFF sa \uFFFE kanto', text: 'tab\there, and é' };
    await queue.send([JSON.stringify(record)]);
    const out = await emulator.sqs.send(new ReceiveMessageCommand({ QueueUrl: config.queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
    const body = out.Messages?.[0]?.Body ?? '';
    expect(body).toMatch(/^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u);
    expect(JSON.parse(body)).toEqual(record);
    queue.close();
  });
});

describe('SQS dead letters (fauxqs)', () => {
  it('lists every one, leaving them in place, and sends each back once, an ingest message as a redelivery', async () => {
    const config = await testConfig('aws', emulator, { QUEUE_URL: emulator.queueUrl(`dlq-${randomBytes(4).toString('hex')}`) });
    const { deadLetterQueueUrl } = await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    const queue = new SqsQueue(emulator.sqs, config.queueUrl);
    const envelope = { v: 1, pkey: 'partner-7', source: 'partner', post_id: 7, received_at: '2026-11-21T00:00:00.000Z', report: { title: 't' } };
    const bodies = [JSON.stringify(envelope), ...Array.from({ length: 24 }, (_, i) => `poison ${i}`)];
    for (let i = 0; i < bodies.length; i += 10) {
      await emulator.sqs.send(new SendMessageBatchCommand({ QueueUrl: deadLetterQueueUrl, Entries: bodies.slice(i, i + 10).map((MessageBody, n) => ({ Id: String(n), MessageBody })) }));
    }
    const dlq = deadLettersFor({ queue, sqs: emulator.sqs, config });
    expect((await dlq.list()).map((l) => l.body).sort()).toEqual([...bodies].sort());
    expect(await dlq.list()).toHaveLength(25);
    expect(await dlq.redrive()).toBe(25);
    expect(await dlq.list()).toEqual([]);
    const back: string[] = [];
    for (let i = 0; i < 10 && back.length < 25; i++) {
      const got = await queue.receive({ maxMessages: 10, waitSeconds: 1, visibilitySeconds: 30 });
      back.push(...got.map((m) => m.body));
      await queue.delete(got.map((m) => m.receipt));
    }
    expect(back.filter((b) => b.startsWith('poison')).sort()).toEqual(bodies.slice(1).sort());
    expect(back.filter((b) => !b.startsWith('poison')).map((b) => JSON.parse(b))).toEqual([{ ...envelope, redelivery: true }]);
    queue.close();
  }, 60_000);
});
