// A Parquet answer whose source fails after its first byte (its file cut short under it, as a
// failing disk would): the answer is cut, and the log says the server failed, never that the
// client hung up; the process answers on.
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { readyKeyOf } from '../../src/archive/sidecars/keys.js';
import { createLogger } from '../../src/shared/log.js';
import { newDayPartKey, newPartKey } from '../../src/store/layout.js';
import { writePartFile } from '../support/parts.js';
import { stalledGet } from '../support/stalledClient.js';
import { eventually, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = 'parquet-cut-tests/1.0';
const HOUR_MS = 3_600_000;
/** Texts that do not compress: a Parquet answer of some 40 MB, more than the socket and the read-ahead hold. */
const REPORTS = 300_000;

let svc: TestService;
let tmpDir: string;
let hour: string;
const lines: string[] = [];

beforeAll(async () => {
  tmpDir = await tempDir('flood-parquet-cut-');
  const config = await testConfig('embedded', undefined, { TMP_DIR: tmpDir, LOG_LEVEL: 'info' });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: false, reconcile: false });
  const hourMs = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 2 * HOUR_MS;
  hour = `start=${new Date(hourMs).toISOString()}&end=${new Date(hourMs + HOUR_MS - 1).toISOString()}`;
  const file = path.join(tmpDir, 'part.parquet');
  await writePartFile(svc.rt.db, file, 0, REPORTS, hourMs, 10, { varied: true });
  await svc.rt.store.put(newPartKey(hourMs), await fs.readFile(file));
  await fs.rm(file);
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

/** The files under TMP_DIR this process holds open though they are deleted (an answer read through its handle). */
async function openDeletedAnswers(): Promise<string[]> {
  const out: string[] = [];
  for (const fd of await fs.readdir('/proc/self/fd')) {
    const target = await fs.readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target.startsWith(tmpDir) && target.endsWith('.parquet (deleted)')) out.push(`/proc/self/fd/${fd}`);
  }
  return out;
}

describe('a Parquet answer whose file fails after its first byte', () => {
  it('is cut, logged as the server\'s failure and not as a hang-up, and the process answers on', async () => {
    const before = lines.length;
    const answer = await stalledGet(svc.url, `/reports/archive?${hour}&format=parquet`, tmpDir, UA);
    expect(answer.status).toBe(200);
    // The answer's file, written by DuckDB and read through its open handle, cut to nothing.
    const held = await openDeletedAnswers();
    expect(held.length).toBeGreaterThan(0);
    for (const file of held) await fs.truncate(file, 0);
    const pulled = await answer.read();
    expect(pulled.cut).toBe(true);
    expect(pulled.body.subarray(0, 4).toString('latin1')).toBe('PAR1');
    const logged = lines.slice(before).map((l) => JSON.parse(l) as Record<string, any>);
    const failed = logged.find((l) => l.msg === 'answer cut short: the server failed after its first byte');
    expect(failed).toMatchObject({ level: 50, request: expect.stringContaining('format=parquet'), err: { message: expect.stringMatching(/truncated/) } });
    expect(logged.map((l) => l.msg)).not.toContainEqual(expect.stringMatching(/client closed/));
    // The process is still there, and answers the same window whole.
    const again = await fetch(`${svc.url}/reports/archive?${hour}&format=parquet`, { headers: { 'User-Agent': UA } });
    expect(again.status).toBe(200);
    const bytes = Buffer.from(await again.arrayBuffer());
    expect(bytes.length).toBe(Number(again.headers.get('content-length')));
    expect(bytes.subarray(-4).toString('latin1')).toBe('PAR1');
  });
});

describe('a text answer whose stored ready texts cannot be read after its first byte (a section damaged on a disk)', () => {
  /** A compacted day of 6,000 reports over 17 hours, its ready texts stored, and the GeoJSON section of its last hour in the index (sent after others) damaged. */
  async function damagedDay(daysAgo: number): Promise<string> {
    const dayMs = Math.floor(Date.now() / 86_400_000) * 86_400_000 - daysAgo * 86_400_000;
    const file = path.join(tmpDir, `day-${daysAgo}.parquet`);
    await writePartFile(svc.rt.db, file, 0, 6_000, dayMs, 10_000, { varied: true });
    const key = newDayPartKey(dayMs);
    expect((await storePartPublisher(svc.rt).publish(key, file)).readyTexts).not.toBe('none');
    const stored = path.join(svc.rt.config.storageUrl.slice('file://'.length), readyKeyOf(key));
    const bytes = await fs.readFile(stored);
    const eol = bytes.indexOf(10);
    const hours = (JSON.parse(bytes.subarray(0, eol).toString('utf8')) as { hours: { geojson: [number, number] }[] }).hours;
    const [start, end] = hours[hours.length - 1]!.geojson;
    const at = eol + 1 + Math.floor((start + end) / 2);
    for (let i = 0; i < 8; i++) bytes[at + i] = bytes[at + i]! ^ 0xa5;
    await fs.writeFile(stored, bytes);
    return `start=${new Date(dayMs).toISOString()}&end=${new Date(dayMs + 86_400_000 - 1).toISOString()}`;
  }

  /** An identity GeoJSON pull (no Accept-Encoding: the sections are inflated as they are sent). */
  const pull = (window: string) =>
    new Promise<{ status: number; cut: boolean; body: string }>((resolve, reject) => {
      let body = '';
      const req = http.get(`${svc.url}/reports/archive?${window}&geoformat=geojson`, { headers: { 'User-Agent': UA } }, (res) => {
        res.on('data', (d: Buffer) => (body += d.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode!, cut: false, body }));
        res.on('aborted', () => resolve({ status: res.statusCode!, cut: true, body }));
        res.on('error', () => resolve({ status: res.statusCode!, cut: true, body }));
      });
      req.on('error', reject);
    });

  it('is cut, logged as the server\'s failure and not as a hang-up', async () => {
    const window = await damagedDay(3);
    const before = lines.length;
    const pulled = await pull(window);
    expect([pulled.status, pulled.cut]).toEqual([200, true]);
    await eventually(async () => (lines.slice(before).some((l) => l.includes('answer cut short')) ? true : undefined), 5_000, 'the failure logged');
    const logged = lines.slice(before).map((l) => JSON.parse(l) as Record<string, any>);
    expect(logged.find((l) => l.msg === 'answer cut short: the server failed after its first byte')).toMatchObject({ level: 50 });
    expect(logged.map((l) => l.msg)).not.toContainEqual(expect.stringMatching(/client closed/));
  });
});
