// On AWS the worker announces archived and retracted reports on SNS (here fauxqs, through the
// real SDK): one CloudEvent per city and barangay, with `city` and `local_area` message
// attributes that an SQS subscription's filter policy selects on; every report once. Publishing
// runs from the event log apart from the flushes: a stalled SNS endpoint holds no flush, and
// what waited is published once it answers again.
import { CreateTopicCommand, SNSClient, SubscribeCommand } from '@aws-sdk/client-sns';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DurableCursor } from '../../src/events/cursor.js';
import { ObjectEventLog } from '../../src/events/objectEventLog.js';
import { snsRelay } from '../../src/events/snsRelay.js';
import { createLogger } from '../../src/shared/log.js';
import { FileObjectStore, localFiles } from '../../src/store/fileStore.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { stallableEndpoint, type StallableEndpoint } from '../faults/support.js';
import { allArchived, API_KEY, eventually, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const SAN_FERNANDO = { lat: 15.0286, lng: 120.6898 };

describe('SNS topic of archived reports', () => {
  let emulator: Emulator;
  let svc: TestService;
  let sns: SNSClient;
  let relayed: StallableEndpoint;
  const queues: Record<string, string> = {};

  beforeAll(async () => {
    emulator = await startEmulator();
    sns = new SNSClient({ endpoint: emulator.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
    // The worker reaches SNS through a relay the test can stall (S3 and SQS stay reachable).
    relayed = await stallableEndpoint(emulator.endpoint);
    const workerSns = new SNSClient({
      endpoint: relayed.url,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 1,
      // A publish sent into the stall hangs until the relay resumes: a flush that waited for it
      // would wait the whole stall.
      requestHandler: { connectionTimeout: 500, requestTimeout: 600_000, throwOnRequestTimeout: true },
    });
    const topic = (await sns.send(new CreateTopicCommand({ Name: 'archived-reports' }))).TopicArn!;
    for (const [name, filter] of [['all', undefined], ['pampanga', { city: ['PH-PG'] }]] as const) {
      const url = (await emulator.sqs.send(new CreateQueueCommand({ QueueName: `sub-${name}` }))).QueueUrl!;
      const arn = (await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
      await sns.send(new SubscribeCommand({ TopicArn: topic, Protocol: 'sqs', Endpoint: arn, ...(filter && { Attributes: { FilterPolicy: JSON.stringify(filter) } }) }));
      queues[name] = url;
    }
    const config = await testConfig('aws', emulator, { SNS_TOPIC_ARN: topic, SNS_RETRY_BASE_SECONDS: '0.2', API_KEYS: `alpha:${API_KEY}` });
    svc = await startTestService(await testRuntime(config, emulator, { sns: workerSns }));
  });
  afterAll(async () => {
    await svc?.stop();
    await relayed?.close();
    await emulator?.stop();
  });

  async function drain(queue: string, into: any[]): Promise<void> {
    const out = await emulator.sqs.send(new ReceiveMessageCommand({ QueueUrl: queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
    for (const m of out.Messages ?? []) into.push(JSON.parse(m.Body!));
  }

  it('publishes each archived report once, per city and barangay, and a filter on city selects', async () => {
    for (const id of [1, 2, 3]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    expect((await postReport(svc.url, report(4, { partner_city: 'Pampanga', location: SAN_FERNANDO }))).status).toBe(201);
    await allArchived(svc.rt);
    const all: any[] = [];
    const pampanga: any[] = [];
    const pkeys = (list: any[]) => list.flatMap((n) => JSON.parse(n.Message).data.features.map((f: any) => f.properties.pkey)).sort();
    await eventually(async () => {
      await drain(queues.all!, all);
      await drain(queues.pampanga!, pampanga);
      return pkeys(all).length === 4 && pampanga.length === 1 ? true : undefined;
    }, 15_000, 'the announcements');
    expect(pkeys(all)).toEqual(['partner-alpha-1', 'partner-alpha-2', 'partner-alpha-3', 'partner-alpha-4']);
    expect(pkeys(pampanga)).toEqual(['partner-alpha-4']);
    const qc = all.find((n) => n.MessageAttributes.city.Value === 'PH-QC');
    expect(qc.MessageAttributes).toMatchObject({
      city: { Type: 'String', Value: 'PH-QC' },
      local_area: { Type: 'String', Value: '1381300020' }, // Central, where Quezon Memorial Circle is
      type: { Type: 'String', Value: 'ph.floodarchive.report.archived.v1' },
    });
    const event = JSON.parse(qc.Message);
    expect(event).toMatchObject({ specversion: '1.0', source: '/reports', type: 'ph.floodarchive.report.archived.v1', data: { type: 'FeatureCollection' } });
    expect(event.data.features.every((f: any) => f.properties.tags.instance_region_code === 'PH-QC')).toBe(true);
  });

  const typesAndPkeys = (list: any[]) =>
    list.flatMap((n) => JSON.parse(n.Message).data.features.map((f: any) => `${JSON.parse(n.Message).type.split('.').at(-2)} ${f.properties.pkey}`)).sort();

  it('publishes a retraction as a retracted event with the same attributes, once', async () => {
    const all: any[] = [];
    const pampanga: any[] = [];
    await drain(queues.all!, all);
    await drain(queues.pampanga!, pampanga);
    const del = await fetch(`${svc.url}/feeds/partner/4`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    await eventually(async () => {
      await drain(queues.all!, all);
      await drain(queues.pampanga!, pampanga);
      return all.length > 0 && pampanga.length > 0 ? true : undefined;
    }, 15_000, 'the retraction');
    const message = pampanga.find((n) => n.MessageAttributes.type.Value === 'ph.floodarchive.report.retracted.v1');
    expect(message).toBeDefined();
    expect(message.MessageAttributes.city).toEqual({ Type: 'String', Value: 'PH-PG' });
    expect(message.MessageAttributes.local_area.Type).toBe('String');
    const feature = JSON.parse(message.Message).data.features[0];
    expect(feature.properties).toMatchObject({ pkey: 'partner-alpha-4', status: 'retracted', title: '', text: '' });
    // A repeated DELETE announces nothing new.
    await fetch(`${svc.url}/feeds/partner/4`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    await new Promise((r) => setTimeout(r, 1_500));
    await drain(queues.all!, all);
    expect(typesAndPkeys(all)).toEqual(['retracted partner-alpha-4']);
  });

  it('never holds a flush while SNS is stalled, and publishes what waited once it answers', async () => {
    relayed.stall();
    for (const id of [20, 21, 22]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    // Archived while the publish hangs (it would hang until the relay resumes).
    await allArchived(svc.rt, 30_000);
    const all: any[] = [];
    await new Promise((r) => setTimeout(r, 1_500));
    await drain(queues.all!, all);
    expect(all).toEqual([]);
    // More flushes go on meanwhile.
    expect((await postReport(svc.url, report(23))).status).toBe(201);
    await allArchived(svc.rt, 30_000);
    relayed.resume();
    await eventually(async () => {
      await drain(queues.all!, all);
      return typesAndPkeys(all).length >= 4 ? true : undefined;
    }, 30_000, 'the announcements that waited');
    await new Promise((r) => setTimeout(r, 1_000));
    await drain(queues.all!, all);
    expect(typesAndPkeys(all)).toEqual(['archived partner-alpha-20', 'archived partner-alpha-21', 'archived partner-alpha-22', 'archived partner-alpha-23']);
  });

  it("keeps the relay's cursor to its newest states: older ones are pruned by its housekeeping", async () => {
    const root = await tempDir('flood-sns-');
    const store = new FileObjectStore(root);
    const feed = new ObjectEventLog(store);
    const cursor = new DurableCursor(store, 'sns', async () => ({ upto: 0 }));
    // Two states a published batch, as a relay leaves them; these from hours ago.
    for (let n = 0; n < 40; n++) expect(await cursor.advance(n, { upto: n })).toBe(true);
    const hoursAgo = new Date(Date.now() - 3 * 3_600_000);
    const states = await keysOf(store, 'events/v1/consumers/sns/');
    for (const key of states) await fs.utimes(localFiles(root).fileOf(key), hoursAgo, hoursAgo);
    const relay = snsRelay(feed, store, sns, { topicArn: 'arn:aws:sns:us-east-1:000000000000:archived-reports', retryBaseMs: 200, retryMaxMs: 1_000, callMs: 5_000 }, createLogger('silent'));
    relay.start();
    try {
      await eventually(async () => ((await keysOf(store, 'events/v1/consumers/sns/')).length < states.length ? true : undefined), 10_000, 'the old states pruned');
    } finally {
      await relay.stop();
    }
    const kept = await keysOf(store, 'events/v1/consumers/sns/');
    expect(kept.filter((k) => !k.endsWith('head.json'))).toHaveLength(1);
    expect((await cursor.current()).state).toEqual({ upto: 39 });
  });
});

async function keysOf(store: FileObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of store.list({ prefix })) keys.push(info.key);
  return keys;
}
