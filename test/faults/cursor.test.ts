// Forged, tampered, truncated and foreign pagination cursors get a 400 in the error shape;
// the cursors the service issues keep working across restarts and across API instances.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/main/runtime.js';
import { createLogger } from '../../src/shared/log.js';
import { cursorFingerprint } from '../../src/http/archive.js';
import { CursorCodec } from '../../src/http/cursor.js';
import { cursorSecret } from '../../src/http/cursorSecret.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { fingerprintOf } from '../../src/http/ogc/reportsItems.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, getJson, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';
import { expectErrorShape } from './support.js';

const START = '2026-11-20T00:00:00+0000';
const END = '2026-11-21T23:59:59+0000';
const WINDOW = `start=${encodeURIComponent(START)}&end=${encodeURIComponent(END)}`;
const UA = { 'User-Agent': 'fault-tests/1.0' };
const SECRET = 'cursor-secret-for-tests-0123456789abcdef';
/** The filters a cursor of this window is bound to, as the service computes them. */
const FINGERPRINT = cursorFingerprint({ start: START, end: END });

async function seed(svc: TestService, n = 5): Promise<void> {
  for (let i = 0; i < n; i += 1) {
    expect((await postReport(svc.url, report(700 + i, { created_at: new Date(Date.UTC(2026, 10, 20, 3, i)).toISOString() }))).status).toBe(201);
  }
  await allArchived(svc.rt);
}

async function nextCursor(url: string): Promise<string> {
  const res = await fetch(`${url}/reports/archive?${WINDOW}&geoformat=geojson&limit=2`, { headers: UA });
  expect(res.status).toBe(200);
  const link = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '');
  expect(link).not.toBeNull();
  return new URL(link![1]!).searchParams.get('cursor')!;
}

const page = (url: string, cursor: string) => getJson(`${url}/reports/archive?${WINDOW}&geoformat=geojson&limit=2&cursor=${encodeURIComponent(cursor)}`, UA);

async function expectCursorRejected(url: string, cursor: string): Promise<any> {
  const res = await page(url, cursor);
  expect(res.status).toBe(400);
  expectErrorShape(res.body, 400);
  expect(res.body.details).toEqual([expect.objectContaining({ in: 'query', field: 'cursor' })]);
  return res.body;
}

describe('pagination cursors (embedded, CURSOR_SECRET set)', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { CURSOR_SECRET: SECRET })));
    await seed(svc);
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('an issued cursor leads to the next page, and fits the served definition', async () => {
    const cursor = await nextCursor(svc.url);
    const res = await page(svc.url, cursor);
    expect(res.status).toBe(200);
    expect(res.body.result.features).toHaveLength(2);
    const document = (await getJson(`${svc.url}/openapi.json`)).body;
    const param = document.paths['/reports/archive'].get.parameters.find((p: any) => p.name === 'cursor');
    expect(cursor).toMatch(new RegExp(param.schema.pattern));
    expect(cursor.length).toBeLessThanOrEqual(param.schema.maxLength);
  });

  it('a forged cursor whose time is 1e300 is a 400, not a 500', async () => {
    const forged = Buffer.from(JSON.stringify({ c: 1e300, k: 'partner-700', r: 1e300, f: FINGERPRINT })).toString('base64url');
    await expectCursorRejected(svc.url, forged);
    const bare = Buffer.from(JSON.stringify([1e300, 'partner-700', 1e300, FINGERPRINT])).toString('base64url');
    await expectCursorRejected(svc.url, bare);
  });

  it('a tampered, truncated or foreign cursor is a 400', async () => {
    const cursor = await nextCursor(svc.url);
    // A token is the base64url payload followed by a 22-character MAC.
    const [payload, mac] = [cursor.slice(0, -22), cursor.slice(-22)];
    const fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown[];
    const moved = Buffer.from(JSON.stringify([Number(fields[0]) - 86_400_000, ...fields.slice(1)])).toString('base64url');
    await expectCursorRejected(svc.url, `${moved}${mac}`);
    await expectCursorRejected(svc.url, cursor.slice(0, cursor.length - 3));
    await expectCursorRejected(svc.url, cursor.slice(0, 20));
    await expectCursorRejected(svc.url, `${cursor}${mac}`);
    await expectCursorRejected(svc.url, `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`);
    await expectCursorRejected(svc.url, 'x'.repeat(5000));
    const foreign = new CursorCodec(async () => Buffer.from('another-deployment-secret-0123456789'));
    await expectCursorRejected(svc.url, await foreign.encode({ createdMs: Number(fields[0]), pkey: String(fields[1]), receivedBeforeMs: Number(fields[2]) }, FINGERPRINT));
  });

  it('a correctly signed cursor holding values out of range is a 400 (a leaked key reaches no query)', async () => {
    const signed = new CursorCodec(async () => Buffer.from(SECRET));
    const now = Date.now();
    for (const bad of [
      { createdMs: 1e300, pkey: 'partner-700', receivedBeforeMs: now },
      { createdMs: Date.UTC(2026, 10, 20), pkey: 'partner-700', receivedBeforeMs: -1e300 },
      { createdMs: 1.5, pkey: 'partner-700', receivedBeforeMs: now },
      { createdMs: Date.UTC(2026, 10, 20), pkey: "x' OR 1=1 --", receivedBeforeMs: now },
      { createdMs: Date.UTC(2026, 10, 20), pkey: 'p'.repeat(300), receivedBeforeMs: now },
    ]) {
      const body = await expectCursorRejected(svc.url, await signed.encode(bad, FINGERPRINT));
      expect(body.details[0].message).toMatch(/outside/);
    }
    // The same check with good values passes: the 400s above are the range check, not the MAC.
    const good = await page(svc.url, await signed.encode({ createdMs: Date.UTC(2026, 10, 20, 3, 3), pkey: pkeyOf(703), receivedBeforeMs: now }, FINGERPRINT));
    expect(good.status).toBe(200);
    expect(good.body.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(702), pkeyOf(701)]);
  });
});

describe('OGC API – Features cursors are signed with the same key', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { CURSOR_SECRET: SECRET })));
    await seed(svc);
  });
  afterAll(async () => {
    await svc?.stop();
  });
  const items = (query: string) => getJson(`${svc.url}/ogc/collections/reports/items?${query}`, UA);

  it('the next link leads on; a forged, altered or foreign cursor is a 400', async () => {
    const first = await items('limit=2');
    expect(first.status).toBe(200);
    const next = new URL(first.body.links.find((l: any) => l.rel === 'next').href).searchParams.get('cursor')!;
    expect((await items(`limit=2&cursor=${next}`)).status).toBe(200);

    // The unsigned form: every field in range and the right filters, only not issued here.
    const now = Date.now();
    const unsigned = Buffer.from(JSON.stringify([now - 300 * 86_400_000, now, Date.UTC(2026, 10, 20, 3, 3), pkeyOf(703), now, fingerprintOf(undefined, undefined)])).toString('base64url');
    const altered = `${next.slice(0, -1)}${next.endsWith('A') ? 'B' : 'A'}`;
    const foreign = await new CursorCodec(async () => Buffer.from('another-deployment-secret-0123456789')).seal(unsigned);
    for (const cursor of [unsigned, altered, foreign, next.slice(0, 30)]) {
      const res = await items(`limit=2&cursor=${cursor}`);
      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(res.body.details).toEqual([expect.objectContaining({ in: 'query', field: 'cursor' })]);
    }
  });
});

describe('a generated cursor key is kept and shared', () => {
  it('on the embedded default: a cursor survives a restart on the same DATA_DIR', async () => {
    const config = await testConfig('embedded');
    let svc = await startTestService(await testRuntime(config));
    await seed(svc);
    const cursor = await nextCursor(svc.url);
    await svc.stop();
    svc = await startTestService(await createRuntime(config, { log: createLogger('silent') }));
    try {
      expect((await page(svc.url, cursor)).status).toBe(200);
    } finally {
      await svc.stop();
    }
  });

  it('on the embedded default: a key file an earlier release left empty (a full disk or a crash cut its write) is replaced, and paging works', async () => {
    const config = await testConfig('embedded');
    await fs.mkdir(config.dataDir, { recursive: true });
    await fs.writeFile(path.join(config.dataDir, 'cursor-secret'), '');
    const svc = await startTestService(await testRuntime(config));
    try {
      await seed(svc);
      expect((await page(svc.url, await nextCursor(svc.url))).status).toBe(200);
      expect((await fs.readFile(path.join(config.dataDir, 'cursor-secret'), 'utf8')).trim().length).toBeGreaterThanOrEqual(32);
      // Only the key: no temporary file of its writing is left beside it.
      expect((await fs.readdir(config.dataDir)).filter((name) => name.startsWith('cursor-secret'))).toEqual(['cursor-secret']);
    } finally {
      await svc.stop();
    }
  });

  it('processes starting together on such a file all end with one key', async () => {
    const config = await testConfig('embedded');
    await fs.mkdir(config.dataDir, { recursive: true });
    const file = path.join(config.dataDir, 'cursor-secret');
    for (let round = 0; round < 20; round++) {
      await fs.writeFile(file, round % 2 === 0 ? '' : 'cut-short');
      const keys = await Promise.all(Array.from({ length: 4 }, () => cursorSecret(config, new FileObjectStore(config.dataDir))));
      expect(new Set(keys.map((k) => k.toString())).size, `round ${round}`).toBe(1);
      expect((await fs.readFile(file, 'utf8')).trim()).toBe(keys[0]!.toString());
    }
    expect((await fs.readdir(config.dataDir)).filter((name) => name.startsWith('cursor-secret'))).toEqual(['cursor-secret']);
  });

  it('on S3: two API instances on one bucket accept each other\'s cursors', async () => {
    const emulator: Emulator = await startEmulator();
    const config = await testConfig('aws', emulator);
    const a = await startTestService(await testRuntime(config, emulator));
    const b = await startTestService(await createRuntime(config, { log: createLogger('silent'), s3: emulator.s3, sqs: emulator.sqs }), { worker: false, reconcile: false });
    try {
      await seed(a);
      // One after the other: fauxqs does not enforce If-None-Match, so two first creations at
      // the same instant are only settled on S3 itself (and MinIO, LocalStack, moto).
      const fromA = await nextCursor(a.url);
      const fromB = await nextCursor(b.url);
      expect((await page(b.url, fromA)).status).toBe(200);
      expect((await page(a.url, fromB)).status).toBe(200);
    } finally {
      await b.stop();
      await a.stop();
      await emulator.stop();
    }
  });
});
