// A store directory copied into a bucket, in a process of its own: the benchmark's process, which
// also runs the client that times every answer, read answers half as fast for the rest of its life
// after it had sent the 680 MB of the year's store itself (its heap was small again; the floor
// slowed from 450–740 to 920–1,160 ms, and a new process was fast). Started with `--child`, it is
// that process (`forked.ts`).
import fsp from 'node:fs/promises';
import path from 'node:path';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mapLimit } from '../src/ops/concurrency.js';
import { answer, childArgs, forkedAnswer } from './forked.js';
import { walkFiles } from './synthetic.js';

/** Uploads every file under `storeDir` to `bucket` at `endpoint` (created first); the number of objects. */
export async function uploadStore(storeDir: string, endpoint: string, bucket: string): Promise<number> {
  return (await forkedAnswer<{ uploaded: number }>(import.meta.url, [storeDir, endpoint, bucket])).uploaded;
}

async function upload(storeDir: string, endpoint: string, bucket: string): Promise<number> {
  const s3 = new S3Client({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, forcePathStyle: true });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const files: string[] = [];
  for await (const file of walkFiles(storeDir)) files.push(file);
  await mapLimit(files, 16, async (file) => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: path.relative(storeDir, file).split(path.sep).join('/'), Body: await fsp.readFile(file) }));
  });
  return files.length;
}

const child = childArgs();
if (child) {
  const [storeDir, endpoint, bucket] = child as [string, string, string];
  answer({ uploaded: await upload(storeDir, endpoint, bucket) });
}
