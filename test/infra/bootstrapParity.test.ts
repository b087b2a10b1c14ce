// bootstrap (run by the service on emulators and by the LocalStack hook's twin)
// creates the queues exactly as the CDK app declares them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { FloodArchiveStack } from '../../infra/floodArchiveStack.js';
import { bootstrap } from '../../src/main/bootstrap.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { testConfig } from '../support/env.js';

const FLUSH = 45;
let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

describe('bootstrap and the CDK app agree', () => {
  it('on the queue and dead-letter queue attributes and the redrive policy, and bootstrap is idempotent', async () => {
    const stack = new FloodArchiveStack(new App(), 'Parity', { imageRepositoryName: 'flood-archive', imageTag: 't', flushIntervalSeconds: FLUSH, allowPlainHttp: true });
    const queues = Object.values(Template.fromStack(stack).toJSON().Resources as Record<string, any>).filter((r) => r.Type === 'AWS::SQS::Queue');
    const main = queues.find((q) => q.Properties.RedrivePolicy)!.Properties;
    const dlq = queues.find((q) => !q.Properties.RedrivePolicy)!.Properties;

    const config = await testConfig('aws', emulator, { FLUSH_INTERVAL_SECONDS: String(FLUSH) });
    const first = await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    expect(await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs })).toEqual(first);
    const got = (await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: first.queueUrl, AttributeNames: ['All'] }))).Attributes!;
    const gotDlq = (await emulator.sqs.send(new GetQueueAttributesCommand({ QueueUrl: first.deadLetterQueueUrl, AttributeNames: ['All'] }))).Attributes!;

    expect(Number(got.VisibilityTimeout)).toBe(main.VisibilityTimeout);
    expect(Number(got.MessageRetentionPeriod)).toBe(main.MessageRetentionPeriod);
    expect(JSON.parse(got.RedrivePolicy!).maxReceiveCount).toBe(main.RedrivePolicy.maxReceiveCount);
    expect(JSON.parse(got.RedrivePolicy!).deadLetterTargetArn).toBe(gotDlq.QueueArn);
    expect(Number(gotDlq.MessageRetentionPeriod)).toBe(dlq.MessageRetentionPeriod);
    // Both name the dead-letter queue after the queue the same way.
    const name = (arn: string) => arn.split(':').pop()!;
    expect(name(gotDlq.QueueArn!)).toBe(`${name(got.QueueArn!)}-dlq`);
    expect(dlq.QueueName).toBe(`${main.QueueName}-dlq`);
  });
});
