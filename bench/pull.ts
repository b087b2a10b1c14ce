// One timed GET of an answer, by a client in a new process each time. A client that has read
// gigabytes reads more slowly for the rest of its life (here the same gigabyte from memory, the
// floor, took 920–1,160 ms in a benchmark process that had read the answers before it, 450–740 in
// a new one), so timing every pull from the benchmark's own process put more of the client into
// each later figure. Started with `--child URL ENCODING` (`forked.ts`), this file is that client.
import http from 'node:http';
import { answer, childArgs, forkedAnswer } from './forked.js';

export interface Pulled {
  /** From the request to the last byte, as the client saw it (its process's start left out). */
  ms: number;
  /** From the request to the answer's first byte (its end, for an answer without a body). */
  firstByteMs: number;
  bytes: number;
  status: number;
  /** The client's CPU from the request to the last byte (its process's start left out): on a shared host, taken from the service's. */
  cpuMs: number;
}

/** GETs `url` (with `Accept-Encoding: encoding`) to its end from a new process. */
export function pull(url: string, encoding = 'identity'): Promise<Pulled> {
  return forkedAnswer<Pulled>(import.meta.url, [url, encoding]);
}

/** A GET read to the end the way curl does it (node:http: lighter on the shared CPU than fetch). */
function timedGet(url: string, encoding: string): Promise<Pulled> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'User-Agent': 'flood-bench/1.0', 'Accept-Encoding': encoding } }, (res) => {
        let bytes = 0;
        let firstByteMs: number | undefined;
        res.on('data', (chunk: Buffer) => {
          firstByteMs ??= performance.now() - t0;
          bytes += chunk.byteLength;
        });
        res.on('end', () => {
          const ms = performance.now() - t0;
          const cpu = process.cpuUsage(cpu0);
          resolve({ ms, firstByteMs: firstByteMs ?? ms, bytes, status: res.statusCode ?? 0, cpuMs: (cpu.user + cpu.system) / 1000 });
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

const child = childArgs();
if (child) answer(await timedGet(child[0]!, child[1]!));
