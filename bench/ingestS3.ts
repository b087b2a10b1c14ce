// Posts accepted on S3 and SQS as they are on the network: an API process (`serve`) on moto
// behind the shaped proxy, partners posting over keep-alive connections, each waiting for its
// answer. An acceptance on S3 is round trips (reads of its keys, conditional writes, the SQS
// message), so its latency is their number times the first-byte delay, which this measures.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { feedBody, postFeed } from './partnerPosts.js';
import { emulatorEnv, startMotoServer } from './moto.js';
import { freePort, startServer } from './server.js';
import type { Shape } from './shapedProxy.js';
import { startShapedProxyProcess } from './shapedProxyProcess.js';

interface Row {
  [k: string]: string | number;
}

export interface IngestS3Options {
  /** Posts per concurrency. */
  posts: number;
  concurrencies: number[];
  shape: Shape;
  apiKey: string;
  /** Another build's cli.js, to compare with. */
  cli?: string;
}

export async function ingestOnShapedS3(options: IngestS3Options, log: (line: string) => void): Promise<{ scenario: string; rows: Row[] }> {
  // Without moto's own per-request costs, which S3 and SQS do not have (moto_lean.py).
  const emulator = await startMotoServer(await freePort(), { lean: true });
  const proxy = await startShapedProxyProcess(emulator.endpoint, options.shape);
  const id = randomBytes(4).toString('hex');
  const server = await startServer(
    { ...emulatorEnv(emulator, id), AWS_ENDPOINT_URL: proxy.url, RATE_LIMIT_FEED_PER_MINUTE: '100000000' },
    { role: 'serve', apiKey: options.apiKey, ...(options.cli && { cli: options.cli }) },
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const rows: Row[] = [];
  let next = 0;
  try {
    for (const concurrency of options.concurrencies) {
      const latencies: number[] = [];
      const answers0 = (await proxy.counts()).answers;
      const t0 = performance.now();
      const end = next + options.posts;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let i = next++; i < end; i = next++) {
            const sent = performance.now();
            const status = await postFeed(agent, `${server.url}/feeds/partner`, feedBody(2_000_000 + i, Date.UTC(2026, 10, 20) + i * 10), options.apiKey);
            if (status !== 201) throw new Error(`POST answered ${status}`);
            latencies.push(performance.now() - sent);
          }
        }),
      );
      next = end;
      const seconds = (performance.now() - t0) / 1000;
      latencies.sort((a, b) => a - b);
      const at = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]! * 10) / 10;
      rows.push({
        concurrency,
        posts: options.posts,
        'accepted/s': Math.round(options.posts / seconds),
        'p50 ms': at(50),
        'p95 ms': at(95),
        'p99 ms': at(99),
        'requests to S3 and SQS per post': Math.round((((await proxy.counts()).answers - answers0) / options.posts) * 10) / 10,
      });
      log(`ingest on shaped S3: concurrency ${concurrency} done in ${Math.round(seconds)} s`);
    }
  } finally {
    agent.destroy();
    await server.stop();
    await proxy.close();
    await emulator.stop();
  }
  const { firstByteMs, bytesPerSecond } = options.shape;
  return { scenario: `ingest on S3 and SQS (moto), shaped: ${firstByteMs} ms to the first byte, ${bytesPerSecond / 1e6} MB/s a connection (serve alone)`, rows };
}
