// Ready texts: every part the worker or compaction writes has its reports serialised beside it
// (ready/v7/, outside the Parquet layout), and answers read from them are byte for byte the
// answers DuckDB builds from the part itself, whole hours and hours a window cuts or only touches alike.
import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { gunzipSync, inflateRawSync } from 'node:zlib';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listWindowParts } from '../../src/archive/partListing.js';
import { readyKeyOf, type ReadyIndex } from '../../src/archive/sidecars/index.js';
import { compact } from '../../src/ops/compact.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { allArchived, API_KEY, keysUnder, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';
import { plainSections, replaceInSections } from '../support/readyTexts.js';

const UA = { 'User-Agent': 'ready-texts-tests/1.0' };
const run = promisify(execFile);
const FROM = Date.UTC(2026, 10, 18, 0, 0, 0);
const DAY = 'start=2026-11-18T00:00:00%2B0000&end=2026-11-18T23:59:59%2B0000';
// Cuts 05:00 (keeps its 05:40 report, leaves out 05:10) and 17:00.
const CUT = 'start=2026-11-18T05:30:00%2B0800&end=2026-11-19T01:20:00%2B0800';
// Filtered by city, or by a bbox that keeps some of Quezon City's points.
const FILTERED = [`${DAY}&admin=PH-QC`, `${CUT}&bbox=121.031,14.6,121.04,14.7`, `${DAY}&admin=PH-PG&bbox=120,15,121,15.1`];
// Touches 04:00 and 06:00 without keeping a report of theirs (04:50 is before it, 06:10 after).
const TOUCH = 'start=2026-11-18T04:55:00%2B0000&end=2026-11-18T06:05:00%2B0000';
// Ends on a report's instant at each end: 05:50 and 06:10 are kept.
const EDGES = 'start=2026-11-18T05:50:00.000%2B0000&end=2026-11-18T06:10:00.000%2B0000';
const ANSWERS = ['geoformat=geojson', 'geoformat=topojson', 'format=geojson', 'format=topojson', 'format=csv', 'format=ndjson'].flatMap((f) => [DAY, CUT, ...FILTERED, TOUCH, EDGES].map((w) => `${w}&${f}`));

let svc: TestService;

async function text(query: string): Promise<string> {
  const res = await fetch(`${svc.url}/reports/archive?${query}`, { headers: UA });
  expect(res.status).toBe(200);
  return res.text();
}

/** An answer's bytes as sent with `Accept-Encoding: gzip` (not decoded, as fetch would). */
function gzipAnswer(query: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    http
      .get(`${svc.url}/reports/archive?${query}`, { headers: { ...UA, 'Accept-Encoding': 'gzip' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 && res.headers['content-encoding'] === 'gzip' ? resolve(Buffer.concat(chunks)) : reject(new Error(`${res.statusCode} ${res.headers['content-encoding']}`))));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** Stored hours of a section whose deflate data is in `answer` as it is stored (a member without its 10-byte header, nor its empty final block and trailer). */
async function copiedHours(answer: Buffer, section: 'geojson' | 'arrow'): Promise<number> {
  let copied = 0;
  for (const key of await keysUnder(svc.rt, 'ready/')) {
    const body = (await svc.rt.store.get(key))!.body;
    const eol = body.indexOf(10);
    const index = JSON.parse(body.subarray(0, eol).toString('utf8')) as ReadyIndex;
    for (const h of index.hours) if (answer.includes(body.subarray(eol + 1 + h[section][0] + 10, eol + 1 + h[section][1] - 10))) copied += 1;
  }
  return copied;
}

async function answers(): Promise<string[]> {
  return Promise.all(ANSWERS.map(text));
}

/** Arrow answers of whole windows (the day, a week around it), as tables. */
const ARROW = [`${DAY}&format=arrow`, 'start=2026-11-15T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000&format=arrow', `${TOUCH}&format=arrow`];
async function arrowAnswers(): Promise<Buffer[]> {
  return Promise.all(
    ARROW.map(async (q) => {
      const res = await fetch(`${svc.url}/reports/archive?${q}`, { headers: UA });
      expect(res.status).toBe(200);
      return Buffer.from(await res.arrayBuffer());
    }),
  );
}
/** A table's schema and rows, comparable whatever its record batches. */
function tableOf(bytes: Buffer): unknown {
  const table = tableFromIPC(bytes);
  const rows = table.toArray().map((r) => JSON.stringify(r.toJSON(), (_, v) => (typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v)));
  return { fields: table.schema.fields.map((f) => `${f.name}:${String(f.type)}:${JSON.stringify([...f.metadata])}`), rows };
}

/** The answers DuckDB builds when no part has ready texts. */
async function withoutReadyTexts<T = string[]>(read: () => Promise<T> = answers as () => Promise<T>): Promise<T> {
  const ready = await keysUnder(svc.rt, 'ready/');
  const saved = await Promise.all(ready.map(async (k) => [k, (await svc.rt.store.get(k))!.body] as const));
  await svc.rt.store.delete(ready);
  try {
    return await read();
  } finally {
    for (const [k, body] of saved) await svc.rt.store.put(k, body);
  }
}

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  // Three reports an hour, with texts that need escaping, two cities.
  for (let i = 0; i < 72; i++) {
    const qc = i % 2 === 0;
    const body = report(8000 + i, {
      created_at: new Date(FROM + i * 20 * 60_000 + 10 * 60_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.63, lng: 121.03 + i * 0.0001 } : { lat: 15.03, lng: 120.68 },
      title: `Baha "${i}" sa kalsada, ñ`,
      text: i % 3 === 0 ? 'Line one\nline two\\ and a tab\t' : 'Hanggang tuhod',
    });
    expect((await postReport(svc.url, body)).status).toBe(201);
  }
  await allArchived(svc.rt);
});
afterAll(async () => {
  await svc?.stop();
});

describe('ready texts', () => {
  it('are written beside the first part the worker stores in each hour, outside the Parquet layout', async () => {
    const hours = await listWindowParts(svc.rt.store, FROM, FROM + 86_399_999);
    expect(hours).toHaveLength(24);
    const ready = await keysUnder(svc.rt, 'ready/');
    const firsts = hours.map((h) => h.parts.map((p) => p.key).sort()[0]!);
    expect(ready.sort()).toEqual(firsts.map(readyKeyOf).sort());
    expect((await keysUnder(svc.rt, 'reports/')).some((k) => k.startsWith('ready/'))).toBe(false);
  });

  it("are not written again for an hour's later parts, which readers de-duplicate with the query engine", async () => {
    const hour = Date.UTC(2026, 10, 16, 3);
    const window = 'start=2026-11-16T03:00:00%2B0000&end=2026-11-16T03:59:59%2B0000&format=ndjson';
    for (const [i, minute] of [[0, 5], [1, 35]] as const) {
      expect((await postReport(svc.url, report(9100 + i, { created_at: new Date(hour + minute * 60_000).toISOString(), text: 'x'.repeat(2000) }))).status).toBe(201);
      await allArchived(svc.rt);
    }
    const [only] = await listWindowParts(svc.rt.store, hour, hour + 3_599_999);
    const parts = only!.parts.map((p) => p.key).sort();
    expect(parts).toHaveLength(2);
    const ready = await keysUnder(svc.rt, 'ready/');
    expect(ready).toContain(readyKeyOf(parts[0]!));
    expect(ready).not.toContain(readyKeyOf(parts[1]!));
    expect((await text(window)).trim().split('\n').map((l) => JSON.parse(l).properties.pkey)).toEqual([pkeyOf(9101), pkeyOf(9100)]);
  });

  it('answer byte for byte as DuckDB renders the parts, whole days, cut hours and hours only touched', async () => {
    const ready = await answers();
    const built = await withoutReadyTexts();
    expect(ready).toEqual(built);
    const cut = JSON.parse(ready[1]!);
    const times = cut.result.features.map((f: any) => Date.parse(f.properties.created_at));
    expect(Math.min(...times)).toBeGreaterThanOrEqual(Date.parse('2026-11-17T21:30:00Z'));
    expect(Math.max(...times)).toBeLessThanOrEqual(Date.parse('2026-11-18T17:20:00Z'));
    expect(JSON.parse(ready[0]!).result.features).toHaveLength(72);
    const timesOf = (i: number) => JSON.parse(ready[i]!).result.features.map((f: any) => f.properties.created_at);
    expect(timesOf(5)).toEqual(['2026-11-18T05:50:00.000Z', '2026-11-18T05:30:00.000Z', '2026-11-18T05:10:00.000Z']);
    expect(timesOf(6)).toEqual(['2026-11-18T06:10:00.000Z', '2026-11-18T05:50:00.000Z']);
    // The filters keep some reports and leave out others.
    for (const [i, n] of [[2, 36], [3, 0], [4, 36]] as const) {
      const kept = JSON.parse(ready[i]!).result.features;
      if (n > 0) expect(kept, ANSWERS[i]).toHaveLength(n);
      else expect(kept.length, ANSWERS[i]).toBeGreaterThan(0);
      expect(kept.length, ANSWERS[i]).toBeLessThan(72);
    }
  });

  it('are sent as they are stored in a gzip answer, text and Arrow: one gzip member, the plain answer\'s bytes, read whole by curl', async () => {
    const plain = await answers();
    const gzipped = await Promise.all(ANSWERS.map(gzipAnswer));
    ANSWERS.forEach((query, i) => {
      const raw = gzipped[i]!;
      expect(gunzipSync(raw).toString('utf8'), query).toBe(plain[i]);
      // One member: its deflate data ends (final block) right before the last 8 bytes.
      const { engine } = inflateRawSync(raw.subarray(10), { info: true }) as unknown as { engine: { bytesWritten: number } };
      expect(10 + engine.bytesWritten + 8, query).toBe(raw.length);
    });
    // The stored sections' deflate data, copied: every hour of the day's sidecars is in the answer as it is stored.
    const day = gzipped[ANSWERS.indexOf(`${DAY}&geoformat=geojson`)]!;
    expect(await copiedHours(day, 'geojson')).toBeGreaterThan(10);
    // Arrow too: the stored record batches' deflate data, between the schema and the end marker.
    const arrowPlain = await arrowAnswers();
    const arrowGzipped = await Promise.all(ARROW.map(gzipAnswer));
    ARROW.forEach((query, i) => expect(gunzipSync(arrowGzipped[i]!).equals(arrowPlain[i]!), query).toBe(true));
    expect(await copiedHours(arrowGzipped[0]!, 'arrow')).toBeGreaterThan(10);
    // curl (and so GDAL) reads a first gzip member only: the whole answer is in it.
    for (const [i, query] of ANSWERS.entries()) {
      const { stdout } = await run('curl', ['-sS', '--compressed', '-A', UA['User-Agent'], `${svc.url}/reports/archive?${query}`], { maxBuffer: 64 * 1024 * 1024 });
      expect(stdout, query).toBe(plain[i]);
    }
  });

  it('are what whole hours are answered with, in every text format: plain reads of the sidecars', async () => {
    const before = await answers();
    // Hours the worker wrote in several flushes have no single sidecar: DuckDB answers them.
    const shared = (await listWindowParts(svc.rt.store, FROM, FROM + 86_399_999)).filter((h) => h.parts.length > 1).map((h) => h.hourMs);
    const inShared = Array.from({ length: 72 }, (_, i) => i).filter((i) => i % 3 !== 0 && shared.includes(Math.floor((FROM + i * 20 * 60_000) / 3_600_000) * 3_600_000)).length;
    // Each sidecar's "Hanggang tuhod" changed in place (same length: its index still holds).
    const ready = await keysUnder(svc.rt, 'ready/');
    const saved = await Promise.all(ready.map(async (k) => [k, (await svc.rt.store.get(k))!.body] as const));
    const count = (text: string, word: string) => text.split(word).length - 1;
    try {
      for (const [k, body] of saved) await svc.rt.store.put(k, replaceInSections(body, 'Hanggang tuhod', 'HANGGANG TUHOD'));
      const changed = await answers();
      /** Whether a "Hanggang tuhod" report of an unfiltered window lies in an hour with a sidecar (flushes decide which hours are shared). */
      const fromSidecar = (query: string) => {
        const [start, end] = ['start', 'end'].map((k) => Date.parse(new URLSearchParams(query).get(k)!.replace(/([+-]\d\d)(\d\d)$/, '$1:$2')));
        return Array.from({ length: 72 }, (_, i) => FROM + i * 20 * 60_000 + 10 * 60_000).some((t, i) => i % 3 !== 0 && t >= start! && t <= end! && !shared.includes(Math.floor(t / 3_600_000) * 3_600_000));
      };
      ANSWERS.forEach((query, i) => {
        // Cut hours and filtered windows too: selected by the sidecars' per-report index.
        const filtered = /admin=|bbox=/.test(query);
        if (filtered) expect(count(changed[i]!, 'HANGGANG TUHOD'), query).toBeGreaterThan(0);
        else expect(count(changed[i]!, 'HANGGANG TUHOD') > 0, query).toBe(fromSidecar(query));
        expect(count(changed[i]!, 'Hanggang tuhod'), query).toBeLessThanOrEqual(inShared);
        expect(count(changed[i]!, 'Hanggang tuhod') + count(changed[i]!, 'HANGGANG TUHOD'), query).toBe(count(before[i]!, 'Hanggang tuhod'));
        if (!query.startsWith(`${DAY}&`) || query.includes('admin')) return;
        expect(count(before[i]!, 'Hanggang tuhod'), query).toBe(48);
        expect(count(changed[i]!, 'Hanggang tuhod'), query).toBe(inShared);
      });
    } finally {
      for (const [k, body] of saved) await svc.rt.store.put(k, body);
    }
  });

  it('answer Arrow with their record batches: the table DuckDB builds, read from the sidecars', async () => {
    const ready = await arrowAnswers();
    const built = await withoutReadyTexts(arrowAnswers);
    expect(tableOf(ready[0]!)).toEqual(tableOf(built[0]!));
    expect(tableOf(ready[1]!)).toEqual(tableOf(built[1]!));
    expect(tableOf(ready[2]!)).toEqual(tableOf(built[2]!));
    expect((tableOf(ready[0]!) as { rows: unknown[] }).rows).toHaveLength(72);
    expect((tableOf(ready[2]!) as { rows: unknown[] }).rows).toHaveLength(3);
    // Read from the sidecars: a text changed in them (byte for byte) is in the answer.
    const keys = await keysUnder(svc.rt, 'ready/');
    const saved = await Promise.all(keys.map(async (k) => [k, (await svc.rt.store.get(k))!.body] as const));
    try {
      for (const [k, body] of saved) await svc.rt.store.put(k, replaceInSections(body, 'Hanggang tuhod', 'HANGGANG TUHOD'));
      const changed = await arrowAnswers();
      expect(changed[0]!.includes('HANGGANG TUHOD')).toBe(true);
      expect(tableOf(changed[0]!)).not.toEqual(tableOf(ready[0]!));
    } finally {
      for (const [k, body] of saved) await svc.rt.store.put(k, body);
    }
  });

  it('never answer a retracted report, and lose its text when the purge rewrites its part', async () => {
    // Every text the sidecars hold, plain.
    const readyText = async () => {
      const bodies = await Promise.all((await keysUnder(svc.rt, 'ready/')).map(async (k) => plainSections((await svc.rt.store.get(k))!.body).toString('utf8')));
      return bodies.join('');
    };
    // A report of an hour otherwise answered from its part's ready texts.
    const held = await readyText();
    const i = Array.from({ length: 72 }, (_, n) => n).find((n) => n % 2 === 1 && held.includes(`Baha \\"${n}\\" sa kalsada`));
    expect(i).toBeDefined();
    expect((await fetch(`${svc.url}/feeds/partner/${8000 + i!}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    const gone = await answers();
    for (const a of gone) expect(a).not.toContain(pkeyOf(8000 + i!));
    expect(gone).toEqual(await withoutReadyTexts());
    expect((await purgeRetracted(svc.rt)).purged).toBe(1);
    expect(await readyText()).not.toContain(`Baha \\"${i}\\" sa kalsada`);
    expect(await answers()).toEqual(gone);
  });

  it('follow compaction: the day part gets its own, the hours lose theirs, answers unchanged', async () => {
    const before = await answers();
    const arrowBefore = (await arrowAnswers()).map(tableOf);
    const result = await compact(svc.rt, { fromMs: FROM, toMs: FROM + 86_399_999, closedBeforeMs: Date.now() });
    expect(result.daysCompacted).toBe(1);
    const parts = (await listWindowParts(svc.rt.store, FROM, FROM + 86_399_999)).flatMap((h) => h.parts.map((p) => p.key));
    expect(parts).toHaveLength(1);
    expect((await keysUnder(svc.rt, 'ready/')).filter((k) => k.includes('/day=18/'))).toEqual([readyKeyOf(parts[0]!)]);
    expect(await answers()).toEqual(before);
    expect(await withoutReadyTexts()).toEqual(before);
    // The day part's sidecar holds one Arrow record batch per hour, each its own hour's rows.
    expect((await arrowAnswers()).map(tableOf)).toEqual(arrowBefore);
  });
});
