// Request logs: one short JSON line per request with its id, and never a partner's API key.
import fs from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { keyDigest, newKey } from '../../src/partners/apiKeys.js';
import { createLogger } from '../../src/shared/log.js';
import { newPartKey } from '../../src/store/layout.js';
import { writePartFile } from '../support/parts.js';
import { allArchived, API_KEY, eventually, postReport, report, startTestService, testConfig, testRuntime, pkeyOf } from '../support/env.js';

/** A log destination that keeps its lines. */
function logSink(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, sink };
}

describe('request logs', () => {
  it('log each request with its id, method, path, status and client, and no headers (the key never appears)', async () => {
    const { lines, sink } = logSink();
    const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
    const svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: false, reconcile: false });
    try {
      const res = await postReport(svc.url, report(501));
      expect(res.status).toBe(201);
      const requestId = res.headers.get('x-request-id');
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.req?.url === '/feeds/partner');
      expect(logged).toMatchObject({ req: { id: requestId, method: 'POST', userAgent: expect.any(String) }, res: { statusCode: 201 }, responseTime: expect.any(Number) });
      expect(logged.req.headers).toBeUndefined();
      // The partner's key name, never the key.
      expect(logged.partner).toMatch(/^key-[0-9a-f]{8}$/);
      expect(lines.join('\n')).not.toContain(API_KEY);

      // A handler's own line carries its request (the id the caller sent) as well as the access line.
      const retraction = await fetch(`${svc.url}/feeds/partner/501`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY, 'X-Request-Id': 'retract-501' } });
      expect(retraction.status).toBe(200);
      expect(retraction.headers.get('x-request-id')).toBe('retract-501');
      const retracted = lines.map((l) => JSON.parse(l)).filter((l) => l.req?.id === 'retract-501');
      expect(retracted.map((l) => l.msg)).toEqual(['report retracted', 'request completed']);
      expect(retracted[0]).toMatchObject({ req: { method: 'DELETE', url: '/feeds/partner/501' }, pkey: pkeyOf(501) });
    } finally {
      await svc.stop();
    }
  });

  it('redact from logged URLs every value shaped like a key: ledger keys, unknown ones, cursors', async () => {
    const { lines, sink } = logSink();
    const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
    const svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: false, reconcile: false });
    try {
      // A key kept in the ledger (`flood-archive keys add`), not in API_KEYS; and one this service never saw.
      const ledgerKey = newKey();
      await svc.rt.ledger.addKey('partner-b', keyDigest(ledgerKey));
      const stranger = 'Zx9-abcdefghijklmnop_QRSTUV.0123';
      // A key pasted as a parameter's name goes as well: whole, the pair it names with it.
      for (const q of [`q=${ledgerKey}`, `note=${encodeURIComponent(stranger)}`, ledgerKey, `x=1&${API_KEY}=1`]) {
        expect((await fetch(`${svc.url}/health?${q}`)).status).toBeLessThan(500);
      }
      const page = await fetch(`${svc.url}/reports/archive?start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z&format=csv&limit=1&cursor=${'A'.repeat(40)}`, { headers: { 'User-Agent': 'log-tests/1.0' } });
      expect(page.status).toBe(400);
      // A key pasted into a path (a configured one, or one with a generated key's shape) goes too;
      // a report's key and a file name stay.
      for (const path of [`/cities/${API_KEY}/local-areas`, `/cities/${ledgerKey}/local-areas`, '/reports/partner-alpha-1234567890123456', '/releases/2025-r1/reports-2025-06.parquet']) {
        expect((await fetch(`${svc.url}${path}`, { headers: { 'User-Agent': 'log-tests/1.0' } })).status).toBeLessThan(500);
      }
      // A boundary version's id (a key's shape too) says which map asked: kept. A key given as a version goes.
      const version = 'a1b2c3d4e5f60718293a4b5c';
      for (const q of [`version=${version}`, `version=${ledgerKey}`]) expect((await fetch(`${svc.url}/cities/levels?${q}`)).status).toBeLessThan(500);
      // A key sent as the request id, or within it, is neither echoed nor logged: the answer gets an id of its own.
      for (const key of [API_KEY, ledgerKey, `trace.${ledgerKey}`, `${API_KEY}-1`]) {
        const keyAsId = await fetch(`${svc.url}/cities/levels`, { headers: { 'X-Request-Id': key } });
        expect(keyAsId.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      }
      // A key within a segment or a value (beside other text, in quotes, in a list), or sent as the
      // User-Agent, goes too.
      // A key one of whose characters is percent-encoded as well.
      const encoded = `%${ledgerKey.charCodeAt(0).toString(16)}${ledgerKey.slice(1)}`;
      const within = [`/reports/${ledgerKey}.cap`, `/x/${ledgerKey}.json`, `/${ledgerKey}%20x`, `/health?q=key%3D${ledgerKey}`, `/health?x=%22${ledgerKey}%22`, `/health?x=${ledgerKey},other`, `/health?x=${API_KEY}.txt`, `/reports/${encoded}.cap`];
      const completed = () => lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request completed');
      for (const path of within) expect((await fetch(`${svc.url}${path}`, { headers: { 'User-Agent': 'log-tests/1.0' } })).status).toBeLessThan(500);
      for (const key of [API_KEY, ledgerKey]) expect((await fetch(`${svc.url}/cities/levels`, { headers: { 'User-Agent': `client ${key}` } })).status).toBeLessThan(500);
      // Each line is written as its answer closes.
      await eventually(async () => (completed().length >= 25 ? true : undefined), 5_000, 'every request logged');
      const urls = completed().map((l) => l.req.url as string);
      expect(urls).toEqual([
        '/health?q=[redacted]',
        '/health?note=[redacted]',
        '/health?[redacted]',
        '/health?x=1&[redacted]',
        '/reports/archive?start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z&format=csv&limit=1&cursor=[redacted]',
        '/cities/[redacted]/local-areas',
        '/cities/[redacted]/local-areas',
        '/reports/partner-alpha-1234567890123456',
        '/releases/2025-r1/reports-2025-06.parquet',
        `/cities/levels?version=${version}`,
        '/cities/levels?version=[redacted]',
        '/cities/levels',
        '/cities/levels',
        '/cities/levels',
        '/cities/levels',
        '/reports/[redacted].cap',
        '/x/[redacted].json',
        '/[redacted]%20x',
        '/health?q=key%3D[redacted]',
        '/health?x=%22[redacted]%22',
        '/health?x=[redacted],other',
        '/health?x=[redacted]',
        '/reports/[redacted].cap',
        '/cities/levels',
        '/cities/levels',
      ]);
      expect(completed().slice(-2).map((l) => l.req.userAgent)).toEqual(['client [redacted]', 'client [redacted]']);
      expect(lines.join('\n')).not.toContain(ledgerKey);
      expect(lines.join('\n')).not.toContain(API_KEY);
    } finally {
      await svc.stop();
    }
  });

  it("leave out the API's own start-up requests: no access line, no request metric, nothing counted against loopback's rate limit", async () => {
    const { lines, sink } = logSink();
    const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'debug', RATE_LIMIT_READ_PER_MINUTE: '50', METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' });
    const svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('debug', sink) }), { worker: false, reconcile: false });
    try {
      // The warm-up ran (its requests answered) before the service said it listens…
      expect(lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'request path warmed up')).toMatchObject({ ms: expect.any(Number) });
      // …and left no trace a user or an operator would count.
      expect(lines.filter((l) => JSON.parse(l).msg === 'request completed')).toEqual([]);
      const metrics = await (await fetch(svc.metricsUrl!)).text();
      expect(metrics).not.toMatch(/http_requests_total\{[^}]*route="\/reports\/archive/);
      const res = await fetch(`${svc.url}/reports/archive/count?start=2026-11-21T00:00:00Z&end=2026-11-21T01:00:00Z`);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit')).toMatch(/remaining=49\b/);
      expect(lines.filter((l) => JSON.parse(l).msg === 'request completed')).toHaveLength(1);
    } finally {
      await svc.stop();
    }
  });

  it('log nothing at info or above for the start-up warm-up, over reports: no client hang-up, no error', async () => {
    const { lines, sink } = logSink();
    const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
    const rt = await testRuntime(config, undefined, { log: createLogger('info', sink) });
    // Reports of the last minutes, one every 50 ms (one part per hour they fall in): the warm-up's
    // window holds them, and its Parquet answer is streamed as any other.
    const now = Date.now();
    const from = now - 240_000;
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    const dir = path.join(config.dataDir, 'parts');
    await fs.mkdir(dir, { recursive: true });
    let first = 0;
    for (const [a, b] of hour > from ? [[from, hour], [hour, now]] : [[from, now]]) {
      const n = Math.floor((b! - a!) / 50);
      if (n === 0) continue;
      const file = path.join(dir, `${first}.parquet`);
      await writePartFile(rt.db, file, first, n, a!, 50);
      await rt.store.put(newPartKey(a!), await fs.readFile(file));
      first += n;
    }
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    try {
      expect(lines.map((l) => JSON.parse(l).msg)).not.toContainEqual(expect.stringMatching(/closed the connection|failed|error/i));
      expect(lines.filter((l) => JSON.parse(l).level >= 40)).toEqual([]);
    } finally {
      await svc.stop();
    }
  });

  it('leave stderr to JSON lines: an answer in every format, plain and gzipped, raises no process warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    // At info, as a service runs: every request has its access line.
    const { sink } = logSink();
    const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
    const svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: true, reconcile: false });
    try {
      for (const id of [601, 602]) expect((await postReport(svc.url, report(id, { created_at: '2026-11-21T05:00:00Z' }))).status).toBe(201);
      await allArchived(svc.rt);
      const window = 'start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z';
      for (const format of ['geojson', 'csv', 'ndjson', 'parquet', 'arrow']) {
        for (const encoding of ['identity', 'gzip']) {
          const res = await fetch(`${svc.url}/reports/archive?${window}&format=${format}`, { headers: { 'User-Agent': 'flood-tests/1.0', 'Accept-Encoding': encoding } });
          expect(res.status, `${format} ${encoding}`).toBe(200);
          await res.arrayBuffer();
        }
      }
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await svc.stop();
    }
  });
});
