// Creates what the service needs to run, idempotently: the object store
// (bucket or directory), the queue and its dead-letter queue with a redrive
// policy. Used at start-up on the embedded default and emulators, by tests,
// and by the LocalStack init hook.
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Config } from '../shared/config.js';
import { failureName, UnavailableError } from '../shared/errors.js';
import { ensureDataDir, ensureFolder } from '../shared/files.js';
import { deadLetterQueueName, QUEUE_SETTINGS } from '../queue/settings.js';
import { parseS3Url } from '../store/s3Location.js';

export interface BootstrapResult {
  storage: string;
  queueUrl?: string;
  deadLetterQueueUrl?: string;
}

export async function bootstrap(
  config: Config,
  clients: { s3?: S3Client; sqs?: SQSClient },
): Promise<BootstrapResult> {
  const result: BootstrapResult = { storage: config.storageUrl };
  ensureDataDir(config.dataDir);
  if (config.storageUrl.startsWith('file://')) {
    ensureFolder(config.storageUrl.slice('file://'.length), 'storage', 'object store folder', 'STORAGE_URL');
  } else {
    const { bucket } = parseS3Url(config.storageUrl);
    // The SDK is loaded only where it is used: the embedded default runs without it.
    const { CreateBucketCommand } = await import('@aws-sdk/client-s3');
    try {
      await clients.s3!.send(new CreateBucketCommand({ Bucket: bucket }));
    } catch (err) {
      if ((err as { name?: string }).name !== 'BucketAlreadyOwnedByYou') throw unavailable('storage', err);
    }
  }
  if (config.queueUrl !== 'sqlite:') {
    try {
      Object.assign(result, await ensureQueues(config, clients.sqs!));
    } catch (err) {
      throw unavailable('queue', err);
    }
  }
  return result;
}

/** The queue and its dead-letter queue, with the redrive policy between them. */
async function ensureQueues(config: Config, sqs: SQSClient): Promise<Pick<BootstrapResult, 'queueUrl' | 'deadLetterQueueUrl'>> {
  const { CreateQueueCommand, GetQueueAttributesCommand, SetQueueAttributesCommand } = await import('@aws-sdk/client-sqs');
  const name = config.queueUrl.replace(/\/+$/, '').split('/').pop()!;
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: deadLetterQueueName(name) }));
  await sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: dlq.QueueUrl,
      Attributes: { MessageRetentionPeriod: String(QUEUE_SETTINGS.retentionSeconds) },
    }),
  );
  const dlqAttrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }));
  const main = await sqs.send(new CreateQueueCommand({ QueueName: name }));
  await sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: main.QueueUrl,
      Attributes: {
        VisibilityTimeout: String(config.worker.visibilitySeconds),
        MessageRetentionPeriod: String(QUEUE_SETTINGS.retentionSeconds),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: dlqAttrs.Attributes?.QueueArn,
          maxReceiveCount: QUEUE_SETTINGS.maxReceiveCount,
        }),
      },
    }),
  );
  return { queueUrl: main.QueueUrl, deadLetterQueueUrl: dlq.QueueUrl };
}

/** A store or queue that cannot be set up is unavailable (exit 69), named with the SDK's or the system's error. */
function unavailable(dependency: 'storage' | 'queue', err: unknown): UnavailableError {
  const what = dependency === 'storage' ? 'object store' : 'queue';
  return new UnavailableError(dependency, `${what} set-up failed (${failureName(err)})`, { cause: err });
}
