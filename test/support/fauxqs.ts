// S3 and SQS on loopback through the real AWS SDK: fauxqs, in-process, port 0.
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import type { Emulator } from '../../bench/moto.js';

export type { Emulator } from '../../bench/moto.js';

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

export async function startEmulator(): Promise<Emulator> {
  let server = await startFauxqs({ port: 0, logger: false });
  const port = server.port;
  const endpoint = `http://127.0.0.1:${port}`;
  // Fail fast in tests that stop the emulator on purpose.
  const common = { endpoint, region: 'us-east-1', credentials, maxAttempts: 1 };
  const s3 = new S3Client({ ...common, forcePathStyle: true });
  const sqs = new SQSClient(common);
  return {
    endpoint,
    s3,
    sqs,
    async stop() {
      await server.stop();
    },
    async restart() {
      server = await startFauxqs({ port, logger: false });
    },
    queueUrl: (name) => `http://sqs.us-east-1.localhost:${port}/000000000000/${name}`,
  };
}
