// A store directory copied into a bucket, in a process of its own: the benchmark's process, which
// also runs the client that times every answer, read answers half as fast for the rest of its life
// after it had sent the 680 MB of the year's store itself (its heap was small again; the floor
// slowed from 450–740 to 920–1,160 ms, and a new process was fast). Started with `--child`, it is
// that process.
import { fork } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mapLimit } from '../src/ops/concurrency.js';
import { walkFiles } from './synthetic.js';

/** Uploads every file under `storeDir` to `bucket` at `endpoint` (created first); the number of objects. */
export function uploadStore(storeDir: string, endpoint: string, bucket: string): Promise<number> {
  const child = fork(fileURLToPath(import.meta.url), ['--child', storeDir, endpoint, bucket], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    let uploaded: number | undefined;
    child.once('message', (m) => (uploaded = (m as { uploaded: number }).uploaded));
    child.once('exit', (code) => (uploaded !== undefined && code === 0 ? resolve(uploaded) : reject(new Error(`the upload exited with ${code}`))));
  });
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

if (process.argv[2] === '--child' && process.send) {
  const [storeDir, endpoint, bucket] = process.argv.slice(3) as [string, string, string];
  process.send({ uploaded: await upload(storeDir, endpoint, bucket) });
  process.disconnect();
}
