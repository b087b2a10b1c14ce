// The change log behind `updated_after`, on a real file store: what a flush records is one
// gzipped log named by when it was written, read back in the span asked for, beside the plain
// logs earlier releases wrote.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGES_PREFIX, ChangeLog } from '../../src/archive/changes.js';
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
});
