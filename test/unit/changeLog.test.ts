// The change log behind `updated_after`, on a real file store: what a flush records is one
// gzipped log named by when it was written, read back in the span asked for, beside the plain
// logs earlier releases wrote.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveStates, CHANGES_PREFIX, ChangeLog, ChangesPrunedError } from '../../src/archive/changes.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { testConfig, testRuntime } from '../support/env.js';
import { FileObjectStore } from '../../src/store/fileStore.js';

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'change-log-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('a change log', () => {
  it('is written gzipped, and read back with the plain logs of earlier releases, by the span it was written in', async () => {
    const store = new FileObjectStore(dir);
    let clock = 1_764_000_000_000;
    const log = new ChangeLog(store, 60_000, 30 * 86_400_000, () => clock);
    const reports = Array.from({ length: 2_000 }, (_, i) => ({ pkey: `partner-${1_000_000 + i}`, createdMs: 1_763_000_000_000 + i * 1_000 }));
    await log.record(reports);
    const keys: string[] = [];
    for await (const o of store.list({ prefix: CHANGES_PREFIX })) keys.push(o.key);
    const [key] = keys;
    expect(key).toMatch(/^changes\/v1\/001764000000000-[0-9A-Z]{26}\.json\.gz$/);
    const stored = (await store.get(key!))!.body;
    expect(JSON.parse(gunzipSync(stored).toString('utf8'))).toEqual({ v: 1, reports: reports.map((r) => [r.pkey, r.createdMs]) });
    // Gzipped: a few bytes a report, where plain JSON took about 30.
    expect(stored.length / reports.length).toBeLessThan(12);

    // A plain log of an earlier release, written later.
    await store.put(`${CHANGES_PREFIX}001764000005000-01KAB0000000000000000000000.json`, JSON.stringify({ v: 1, reports: [['partner-7', 1_763_500_000_000]] }));
    clock += 10_000;
    expect(await log.written(1_763_999_999_999, 1_764_000_001_000)).toEqual(reports);
    expect(await log.written(1_764_000_000_000, clock)).toEqual([{ pkey: 'partner-7', createdMs: 1_763_500_000_000 }]);
    expect((await log.written(1_763_999_999_999, clock)).length).toBe(2_001);
  });

  it('answers a sync pruned while it reads with the horizon (410), never with the changes that were left', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const RETENTION = 86_400_000;
      const t0 = 1_764_000_000_000;
      let clock = t0;
      // The scheduled prune runs between the sync's listing of the logs and its reading them, a
      // retention after the log was written.
      let pruned = false;
      const store = new Proxy(rt.store, {
        get(target, name) {
          const value = Reflect.get(target, name, target) as unknown;
          if (name !== 'get') return typeof value === 'function' ? value.bind(target) : value;
          return async (key: string) => {
            if (key.startsWith(CHANGES_PREFIX) && !pruned) {
              pruned = true;
              clock = t0 + RETENTION + 10;
              await log.prune();
            }
            return target.get(key);
          };
        },
      }) as ObjectStore;
      const log = new ChangeLog(store, 60_000, RETENTION, () => clock);
      await log.record([{ pkey: 'partner-1', createdMs: t0 - 5_000 }]);
      clock = t0 + 1_000;
      const states = archiveStates(rt.ledger, log, () => clock);
      const sync = await states.changed(t0 - 1, t0 + 1_000).catch((err: unknown) => err);
      expect(pruned).toBe(true);
      expect(sync).toBeInstanceOf(ChangesPrunedError);
      expect((sync as ChangesPrunedError).horizonMs).toBe(t0 + 10);
    } finally {
      await rt.close();
    }
  });
});
