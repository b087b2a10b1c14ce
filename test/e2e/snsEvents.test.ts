// On AWS the worker announces archived reports on SNS (here fauxqs, through the real SDK): one
// CloudEvent per city and barangay, with `city` and `local_area` message attributes that an SQS
// subscription's filter policy selects on; every report once.
import { CreateTopicCommand, SNSClient, SubscribeCommand } from '@aws-sdk/client-sns';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, eventually, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const SAN_FERNANDO = { lat: 15.0286, lng: 120.6898 };

describe('SNS topic of archived reports', () => {
  let emulator: Emulator;
  let svc: TestService;
  let sns: SNSClient;
  const queues: Record<string, string> = {};

  beforeAll(async () => {
    emulator = await startEmulator();
    sns = new SNSClient({ endpoint: emulator.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
    const topic = (await sns.send(new CreateTopicCommand({ Name: 'archived-reports' }))).TopicArn!;
    for (const [name, filter] of [['all', undefined], ['pampanga', { city: ['PH-PG'] }]] as const) {
      const url = (await emulator.sqs.send(new CreateQueueCommand({ QueueName: `sub-${name}` }))).QueueUrl!;
      const arn = (await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
      await sns.send(new SubscribeCommand({ TopicArn: topic, Protocol: 'sqs', Endpoint: arn, ...(filter && { Attributes: { FilterPolicy: JSON.stringify(filter) } }) }));
      queues[name] = url;
    }
    const config = await testConfig('aws', emulator, { SNS_TOPIC_ARN: topic });
    svc = await startTestService(await testRuntime(config, emulator, { sns }));
  });
  afterAll(async () => {
    await svc?.stop();
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
    expect(pkeys(all)).toEqual(['partner-1', 'partner-2', 'partner-3', 'partner-4']);
    expect(pkeys(pampanga)).toEqual(['partner-4']);
    const qc = all.find((n) => n.MessageAttributes.city.Value === 'PH-QC');
    expect(qc.MessageAttributes).toMatchObject({
      city: { Type: 'String', Value: 'PH-QC' },
      local_area: { Type: 'String', Value: 'none' },
      type: { Type: 'String', Value: 'ph.floodarchive.report.archived.v1' },
    });
    const event = JSON.parse(qc.Message);
    expect(event).toMatchObject({ specversion: '1.0', source: '/reports', type: 'ph.floodarchive.report.archived.v1', data: { type: 'FeatureCollection' } });
    expect(event.data.features.every((f: any) => f.properties.tags.instance_region_code === 'PH-QC')).toBe(true);
  });
});
