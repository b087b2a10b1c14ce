// Parts merged away by compaction or rewritten by a reprocess stay readable for RETIRE_GRACE_SECONDS
// after their successor is stored: an answer that listed them before (a long pull, a page being
// built) still reads them, with every report once, on both backends. Then they are gone, and an
// answer slower than that reads their successors instead, by every path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import type { FeatureBatch } from '../../src/archive/render.js';
import { plainPieces, renderArchive } from '../../src/http/archiveBody.js';
import { exportWindow } from '../../src/ops/exportWindow.js';
import { Archive, type Window } from '../../src/archive/window.js';
import { PartCache } from '../../src/archive/partCache.js';
import { localFiles } from '../../src/store/fileStore.js';
import { readyKeyOf, statsKeyOf } from '../../src/archive/sidecars/keys.js';
import { newDayPartKey, newPartKey, partitionOfPartKey } from '../../src/store/layout.js';
import type { ListOptions, ObjectInfo, ObjectStore } from '../../src/store/objectStore.js';
import { compact } from '../../src/ops/compact.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, BACKENDS, type BackendKind, eventually, keysUnder, pkeyOf, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAY = Date.UTC(2026, 10, 18);
const DAY_MS = 86_400_000;
const GRACE_S = 3;

/**
 * A service on `kind` whose parts are retired `graceS` after their successor, holding three
 * reports of DAY: two parts in one hour (a reprocess writes them as one) and another hour
 * (compaction merges the day).
 */
function serviceWithDay(kind: BackendKind, graceS: number) {
  const env: { emulator?: Emulator; svc?: TestService; dir: string } = { dir: '' };
  beforeAll(async () => {
    if (kind === 'aws') env.emulator = await startEmulator();
    env.svc = await startTestService(await testRuntime(await testConfig(kind, env.emulator, { RETIRE_GRACE_SECONDS: String(graceS) }), env.emulator));
    env.dir = await tempDir();
    for (const [id, hour] of [[1, 3], [2, 3], [3, 9]] as const) {
      expect((await postReport(env.svc.url, report(id, { created_at: new Date(DAY + hour * 3_600_000).toISOString() }))).status).toBe(201);
      await allArchived(env.svc.rt);
    }
  }, 60_000);
  afterAll(async () => {
    await env.svc?.stop();
    await env.emulator?.stop();
  });
  const svc = () => env.svc!;
  return {
    svc,
    dir: () => env.dir,
    parts: async () => (await keysUnder(svc().rt, 'reports/v1/year=2026/month=11/day=18/')).filter((k) => k.endsWith('.parquet')),
    rowsOf: async (file: string) =>
      svc().rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey FROM read_parquet('${file}') ORDER BY pkey`)).getRowObjectsJS().map((r) => r.pkey)),
  };
}

describe.each(BACKENDS)('retired parts on the %s backend', (kind) => {
  const { svc: service, dir: dirOf, parts, rowsOf } = serviceWithDay(kind, GRACE_S);

  for (const job of ['reprocess', 'compaction'] as const) {
    it(`an answer planned before a ${job} reads the parts it listed after their successor is stored`, async () => {
      const svc = service();
      const dir = dirOf();
      const before = await parts();
      expect(before.length).toBeGreaterThan(1);
      const window = await svc.rt.archive.open({ startMs: DAY, endMs: DAY + DAY_MS - 1, admin: undefined });
      const started = performance.now();
      const running = job === 'compaction' ? compact(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, closedBeforeMs: Date.now() }) : reprocess(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, dryRun: false });
      running.catch(() => undefined);
      // The successor is stored; the old parts are still there.
      await eventually(async () => ((await parts()).some((k) => !before.includes(k)) ? true : undefined), 20_000, 'the new part');
      // In the store itself (on S3 the window may read its copies in the part cache, which the job filled).
      expect((await parts()).filter((k) => before.includes(k)).sort()).toEqual([...before].sort());
      const file = path.join(dir, `${kind}-${job}.parquet`);
      await window.writeParquet(file);
      expect(await rowsOf(file)).toEqual([pkeyOf(1), pkeyOf(2), pkeyOf(3)]);
      await running;
      // Not before the grace: then the parts it replaced are gone (a reprocess rewrites the hour
      // of two parts; compaction, the whole day).
      expect(performance.now() - started).toBeGreaterThanOrEqual(GRACE_S * 1000 - 50);
      const replaced = before.filter((k) => job === 'compaction' || k.includes('/hour=03/'));
      expect(replaced.length).toBeGreaterThan(1);
      expect((await parts()).filter((k) => replaced.includes(k))).toEqual([]);
    }, 60_000);
  }
});

describe.each(BACKENDS)('an answer slower than the grace on the %s backend', (kind) => {
  const { svc: service, dir: dirOf, parts, rowsOf: pkeysOfParquet } = serviceWithDay(kind, 0);
  const all = [pkeyOf(1), pkeyOf(2), pkeyOf(3)];

  for (const job of ['reprocess', 'compaction'] as const) {
    it(`a window planned before a ${job} whose parts are gone since reads their successors`, async () => {
      const svc = service();
      const dir = dirOf();
      const before = await parts();
      const range = { startMs: DAY, endMs: DAY + DAY_MS - 1, admin: undefined };
      const whole = await svc.rt.archive.open(range);
      const paged = await svc.rt.archive.open({ ...range, limit: 10 });
      await (job === 'compaction' ? compact(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, closedBeforeMs: Date.now() }) : reprocess(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, dryRun: false }));
      // Parts the windows listed are gone from the store.
      expect(whole.parts().map((p) => p.key).sort()).toEqual([...before].sort());
      expect((await parts()).filter((k) => before.includes(k)).length).toBeLessThan(before.length);
      // And from the part cache, which the job filled on S3: the window must go to the store.
      for (const f of await fs.readdir(svc.rt.config.cacheDir).catch(() => [])) if (f.endsWith('.parquet')) await fs.rm(path.join(svc.rt.config.cacheDir, f));

      const opened = { archive: { open: async () => whole } };
      const geojson = path.join(dir, `${kind}-${job}.geojson`);
      await exportWindow(opened, range, 'geojson', geojson);
      const features = JSON.parse(await fs.readFile(geojson, 'utf8')).features as { properties: { pkey: string } }[];
      expect(features.map((f) => f.properties.pkey).sort()).toEqual(all);
      const parquet = path.join(dir, `${kind}-${job}.parquet`);
      await whole.writeParquet(parquet);
      expect(await pkeysOfParquet(parquet)).toEqual(all);
      const release = path.join(dir, `${kind}-${job}-release.parquet`);
      expect((await whole.writeReleaseParquet(release)).reports).toBe(3);
      expect(await pkeysOfParquet(release)).toEqual(all);
      const arrow: Uint8Array[] = [];
      for await (const piece of plainPieces(whole.arrow())) arrow.push(typeof piece === 'string' ? Buffer.from(piece) : piece);
      expect(tableFromIPC(Buffer.concat(arrow)).getChild('pkey')!.toArray().slice().sort()).toEqual(all);
      expect(await whole.count()).toBe(3);
      const extent = await whole.extent();
      expect(extent).toEqual({ count: 3, firstMs: DAY + 3 * 3_600_000, lastMs: DAY + 9 * 3_600_000 });
      expect((await whole.stats({ interval: 'day', by: 'none', offsetMinutes: 0 })).map((r) => r.count)).toEqual([3]);
      const page = await paged.page('geojson');
      expect(page.batches.flatMap((b) => b.items as string[]).map((item) => JSON.parse(item).properties.pkey).sort()).toEqual(all);
    }, 60_000);
  }
});

describe.each(BACKENDS)('a day read as it is sent on the %s backend', (kind) => {
  const { svc: service } = serviceWithDay(kind, 0);

  it('is sent whole though its parts and their ready texts are deleted after it was prepared: what an answer holds stays readable', async () => {
    const svc = service();
    const range = { startMs: DAY, endMs: DAY + DAY_MS - 1, admin: undefined };
    const window = await svc.rt.archive.open(range);
    const day = 'year=2026/month=11/day=18/';
    const stored = async () => (await Promise.all(['reports/v1/', 'ready/', 'stats/'].map((prefix) => keysUnder(svc.rt, prefix)))).flat().filter((k) => k.includes(day));
    expect((await stored()).some((k) => k.startsWith('ready/'))).toBe(true);
    // The day is prepared (its ready texts' index read, its DuckDB hours built) when its batch
    // comes; its ready hours are read as its items are sent. Every file of the day goes between.
    async function* retiredOnceServed(batches: AsyncIterable<FeatureBatch>): AsyncIterable<FeatureBatch> {
      for await (const batch of batches) {
        await svc.rt.store.delete(await stored());
        yield batch;
      }
    }
    const pieces: (string | Uint8Array)[] = [];
    for await (const piece of plainPieces(renderArchive(retiredOnceServed(window.batches('geojson', ',\n')), 'featurecollection'))) pieces.push(piece);
    expect(await stored()).toEqual([]);
    const features = JSON.parse(Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString('utf8')).features as { properties: { pkey: string } }[];
    expect(features.map((f) => f.properties.pkey).sort()).toEqual([pkeyOf(1), pkeyOf(2), pkeyOf(3)]);
    // On a local store what it held was pinned (hard links), each let go with its day.
    const { storageUrl } = svc.rt.config;
    if (storageUrl.startsWith('file://')) expect(await fs.readdir(path.join(storageUrl.slice('file://'.length), '.tmp-pins'))).toEqual([]);
  }, 60_000);
});

describe.each(BACKENDS)('a day rewritten again and again while it is read on the %s backend', (kind) => {
  const { svc: service, dir: dirOf, rowsOf: pkeysOfParquet } = serviceWithDay(kind, 0);
  const all = [pkeyOf(1), pkeyOf(2), pkeyOf(3)];
  const dayParts = 'reports/v1/year=2026/month=11/day=18/';

  /**
   * The service's store, but each of the next `rewrites` listings that names the day's parts
   * is made stale as it is returned: every part it names is copied to a new part (a later name,
   * the same reports) and deleted with its sidecars, as a job run again and again retires parts
   * while answers read them.
   */
  function churning(store: ObjectStore) {
    const state = { rewrites: 0 };
    const rewrite = async (key: string) => {
      const partition = partitionOfPartKey(key)!;
      const successor = partition.wholeDay ? newDayPartKey(partition.startMs) : newPartKey(partition.startMs);
      await store.put(successor, (await store.get(key))!.body);
      await store.delete([key, readyKeyOf(key), statsKeyOf(key)]);
    };
    const list = async function* (options: ListOptions): AsyncIterable<ObjectInfo> {
      const listed: ObjectInfo[] = [];
      for await (const info of store.list(options)) listed.push(info);
      const parts = listed.filter((i) => i.key.startsWith(dayParts) && i.key.endsWith('.parquet'));
      if (parts.length > 0 && state.rewrites > 0) {
        state.rewrites -= 1;
        for (const part of parts) await rewrite(part.key);
      }
      yield* listed;
    };
    const proxy = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'list') return list;
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return { store: proxy, state };
  }

  it('answers every report once, by every path, though each new listing of the day is stale by the time it is read', async () => {
    const svc = service();
    const dir = dirOf();
    const { store, state } = churning(svc.rt.store);
    const { storageUrl } = svc.rt.config;
    const local = storageUrl.startsWith('file://') ? localFiles(storageUrl.slice('file://'.length)) : undefined;
    const range = { startMs: DAY, endMs: DAY + DAY_MS - 1, admin: undefined };
    // More stale listings in a row than the three tries reads were once given.
    const REWRITES = 4;
    const read = async <T>(what: (window: Window) => Promise<T>): Promise<T> => {
      state.rewrites = REWRITES;
      // Cold, as in a new API task: on S3 no copy of a part from an earlier read stands in for the store.
      const archive = new Archive(store, new PartCache(store, await tempDir(), 1 << 30, undefined, local), svc.rt.db);
      const got = await what(await archive.open(range));
      expect(state.rewrites).toBe(0);
      return got;
    };

    const geojson = path.join(dir, `${kind}-churn.geojson`);
    await read((window) => exportWindow({ archive: { open: async () => window } }, range, 'geojson', geojson));
    const features = JSON.parse(await fs.readFile(geojson, 'utf8')).features as { properties: { pkey: string } }[];
    expect(features.map((f) => f.properties.pkey).sort()).toEqual(all);
    expect(await read((window) => window.count())).toBe(3);
    const parquet = path.join(dir, `${kind}-churn.parquet`);
    await read((window) => window.writeParquet(parquet));
    expect(await pkeysOfParquet(parquet)).toEqual(all);
    const arrow = await read(async (window) => {
      const pieces: Uint8Array[] = [];
      for await (const piece of plainPieces(window.arrow())) pieces.push(typeof piece === 'string' ? Buffer.from(piece) : piece);
      return Buffer.concat(pieces);
    });
    expect(tableFromIPC(arrow).getChild('pkey')!.toArray().slice().sort()).toEqual(all);
  }, 60_000);
});

describe.each(BACKENDS)('a long window whose later days are rewritten each time its earlier ones are read, on the %s backend', (kind) => {
  // 40 days holding reports, each hour of two parts (as a reprocess leaves an hour until its old
  // part is retired): more than a month's days, which reads hold and try again together.
  const FIRST = Date.UTC(2026, 8, 1, 6);
  const DAYS = 40;
  const EARLIER = 9;
  const env: { emulator?: Emulator; svc?: TestService; dir: string } = { dir: '' };
  beforeAll(async () => {
    if (kind === 'aws') env.emulator = await startEmulator();
    env.svc = await startTestService(await testRuntime(await testConfig(kind, env.emulator, { RETIRE_GRACE_SECONDS: '0' }), env.emulator));
    env.dir = await tempDir();
    for (const round of [0, 1]) {
      for (let d = 0; d < DAYS; d++) expect((await postReport(env.svc.url, report(1 + round * DAYS + d, { created_at: new Date(FIRST + d * DAY_MS + round * 60_000).toISOString() }))).status).toBe(201);
      await allArchived(env.svc.rt);
    }
  }, 120_000);
  afterAll(async () => {
    await env.svc?.stop();
    await env.emulator?.stop();
  });

  /**
   * The service's store, and its local files: the first read of a part of the window's newest
   * days after each listing rewrites every part of its EARLIER oldest days (copied to a later
   * name, the same reports; the old part deleted with its sidecars), as a job retiring parts all
   * along makes a listing stale before a long read reaches its far end.
   */
  function retiringAlong(store: ObjectStore, root: string | undefined) {
    const earlier = (key: string) => {
      const partition = partitionOfPartKey(key);
      return partition !== undefined && partition.startMs < FIRST + EARLIER * DAY_MS;
    };
    const state = { armed: false, rewrites: 0 };
    const rewrite = async () => {
      const keys: string[] = [];
      for await (const info of store.list({ prefix: 'reports/v1/year=2026/' })) if (info.key.endsWith('.parquet') && earlier(info.key)) keys.push(info.key);
      for (const key of keys) {
        await store.put(newPartKey(partitionOfPartKey(key)!.startMs), (await store.get(key))!.body);
        await store.delete([key, readyKeyOf(key), statsKeyOf(key)]);
      }
      state.rewrites += 1;
    };
    let rewriting: Promise<void> = Promise.resolve();
    const touched = (key: string) => {
      if (!state.armed || !key.endsWith('.parquet') || !key.startsWith('reports/') || earlier(key)) return;
      state.armed = false;
      rewriting = rewriting.then(rewrite);
    };
    const proxy = new Proxy(store, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        if (prop === 'list') {
          return (options: ListOptions) => {
            state.armed = true;
            return store.list(options);
          };
        }
        if (prop === 'get' || prop === 'getStream' || prop === 'getRange' || prop === 'getRangeStream') {
          return (key: string, ...rest: unknown[]) => {
            touched(key);
            return (value as (...args: unknown[]) => unknown).call(target, key, ...rest);
          };
        }
        return value.bind(target);
      },
    });
    const files = root === undefined ? undefined : localFiles(root);
    const local = files && {
      fileOf: (key: string) => (touched(key), files.fileOf(key)),
      pin: (key: string) => (touched(key), files.pin(key)),
    };
    return { store: proxy, local, state, settled: () => rewriting };
  }

  it('counts and writes it whole: each month of days is held and tried again alone, where the whole window tried again went stale again each time', async () => {
    const svc = env.svc!;
    const { storageUrl } = svc.rt.config;
    const range = { startMs: FIRST - 6 * 3_600_000, endMs: FIRST + DAYS * DAY_MS, admin: undefined };
    const read = async <T>(what: (window: Window) => Promise<T>): Promise<T> => {
      const { store, local, state, settled } = retiringAlong(svc.rt.store, storageUrl.startsWith('file://') ? storageUrl.slice('file://'.length) : undefined);
      // Cold, as in a new API task: on S3 no copy of a part from an earlier read stands in for the store.
      const archive = new Archive(store, new PartCache(store, await tempDir(), 1 << 30, undefined, local), svc.rt.db);
      const got = await what(await archive.open(range));
      await settled();
      // The earlier days went stale under the read, at least once.
      expect(state.rewrites).toBeGreaterThan(0);
      return got;
    };
    const all = Array.from({ length: 2 * DAYS }, (_, i) => pkeyOf(i + 1)).sort();
    expect(await read((window) => window.count())).toBe(2 * DAYS);
    const byDay = await read((window) => window.stats({ interval: 'day', by: 'none', offsetMinutes: 0 }));
    expect(byDay.map((r) => r.count)).toEqual(Array.from({ length: DAYS }, () => 2));
    const parquet = path.join(env.dir, `${kind}-along.parquet`);
    await read((window) => window.writeParquet(parquet));
    // Every report once, newest first across the pieces' seams, as every answer goes.
    const rows = await svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE AS ms FROM read_parquet('${parquet}')`)).getRowObjectsJS());
    expect(rows.map((r) => String(r.pkey)).sort()).toEqual(all);
    const times = rows.map((r) => Number(r.ms));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  }, 120_000);
});
