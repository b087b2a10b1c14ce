// A part whose bytes changed after it was written (a disk's damage): every part is sealed as it is
// stored, `verify` names a damaged one (exit 1) and neither it nor a repair reads reports from it,
// compaction leaves its day as it is and fails naming it, and the part restored from a backup is
// whole again.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listWindowParts } from '../../src/archive/partListing.js';
import { checkSeal, DamagedPartsError } from '../../src/archive/partSeal.js';
import { compaction } from '../../jobs/compaction.js';
import { compact } from '../../src/ops/compact.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { verify } from '../../src/ops/verify.js';
import type { Runtime } from '../../src/main/runtime.js';
import type { Config } from '../../src/shared/config.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { runCli } from '../support/cli.js';
import { allArchived, API_KEY, BACKENDS, pkeyOf, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAY = { fromMs: Date.parse('2026-11-21T00:00:00Z'), toMs: Date.parse('2026-11-21T23:59:59.999Z') };
const IDS = [1, 2, 3, 4, 5, 6];
const partsOfDayIn = async (rt: Runtime) => (await listWindowParts(rt.store, DAY.fromMs, DAY.toMs)).flatMap((h) => h.parts);

describe.each(BACKENDS)('a damaged part on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let config: Config;
  let svc: TestService;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    config = await testConfig(kind, emulator);
    svc = await startTestService(await testRuntime(config, emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const partsOfDay = () => partsOfDayIn(svc.rt);

  it('is named by verify and compaction, read by neither, and whole again once restored', async () => {
    // Two hours' parts, merged into the day's.
    for (const id of IDS) expect((await postReport(svc.url, report(id, { created_at: `2026-11-21T${id % 2 ? '03' : '05'}:0${id}:00Z`, title: `report ${id}` }))).status).toBe(201);
    await allArchived(svc.rt);
    for (const part of await partsOfDay()) expect((await checkSeal((await svc.rt.store.get(part.key))!.body)).state, part.key).toBe('sealed');
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    const [part] = await partsOfDay();
    expect(await partsOfDay()).toHaveLength(1);
    const whole = (await svc.rt.store.get(part!.key))!.body;
    expect((await checkSeal(whole)).state).toBe('sealed');
    expect(await verify(svc.rt, DAY)).toMatchObject({ ok: true, missing: [], damagedParts: [] });

    // Three bytes flipped in the middle of its pages.
    const pagesEnd = whole.length - 8 - whole.readUInt32LE(whole.length - 8);
    const damaged = Buffer.from(whole);
    for (const at of [Math.floor(pagesEnd / 3), Math.floor(pagesEnd / 2), Math.floor((2 * pagesEnd) / 3)]) damaged[at] = damaged[at]! ^ 0x5a;
    await svc.rt.store.put(part!.key, damaged);

    const found = await verify(svc.rt, DAY);
    expect(found).toMatchObject({ ok: false, damagedParts: [{ key: part!.key, reason: expect.stringMatching(/SHA-256/) }], unexpected: [] });
    // Its reports are in no part that can be read: counted missing, not taken from damaged bytes.
    expect(found.missing).toEqual(IDS.map((id) => pkeyOf(id)).sort());
    // A repair adopts nothing from it, and says it is still there.
    expect(await verify(svc.rt, { ...DAY, repair: true })).toMatchObject({ ok: false, adopted: 0, unexpected: [], damagedParts: [{ key: part!.key }] });
    // The CLI exits 1 naming the part.
    const env = { DATA_DIR: config.dataDir, API_KEYS: API_KEY, ...(emulator && { STORAGE_URL: config.storageUrl, QUEUE_URL: config.queueUrl, AWS_ENDPOINT_URL: emulator.endpoint, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' }) };
    const cli = await runCli(['verify', '--from', '2026-11-21', '--to', '2026-11-21'], env);
    expect(cli.code, cli.stderr.slice(-600)).toBe(1);
    expect(cli.stdout).toContain(part!.key);
    expect(cli.stdout).toMatch(/DAMAGED PARTS FOUND/);

    // Compaction reads nothing of it into a new part: its day left as it is, the run failed naming it.
    expect((await postReport(svc.url, report(7, { created_at: '2026-11-21T07:07:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    const before = (await partsOfDay()).map((p) => p.key).sort();
    expect(before).toHaveLength(2);
    const failed = await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() }).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(DamagedPartsError);
    expect((failed as DamagedPartsError).parts.map((p) => p.key)).toEqual([part!.key]);
    expect((failed as Error).message).toMatch(/restore it from a backup/);
    expect((await partsOfDay()).map((p) => p.key).sort()).toEqual(before);

    // The purge rewrites the other days' parts, marks their retractions purged, and leaves this
    // day's unpurged (so still hidden from answers) until the part is restored; the hourly job
    // does the rest of its work, then fails naming the part.
    expect((await postReport(svc.url, report(8, { created_at: '2026-11-22T08:08:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    for (const id of [2, 8]) expect((await fetch(`${svc.url}/feeds/partner/${id}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    const unpurged = async () => {
      const out: string[] = [];
      for await (const r of svc.rt.ledger.retractions({ unpurgedOnly: true })) out.push(r.pkey);
      return out.sort();
    };
    expect(await unpurged()).toEqual([pkeyOf(2), pkeyOf(8)].sort());
    const purging = await purgeRetracted(svc.rt).catch((err: unknown) => err);
    expect(purging).toBeInstanceOf(DamagedPartsError);
    expect(await unpurged()).toEqual([pkeyOf(2)]);
    await expect(compaction.run(svc.rt)).rejects.toBeInstanceOf(DamagedPartsError);

    // Restored from a backup: whole, and compacted with the day's other part.
    await svc.rt.store.put(part!.key, whole);
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    expect(await partsOfDay()).toHaveLength(1);
    expect(await verify(svc.rt, DAY)).toMatchObject({ ok: true, missing: [], damagedParts: [] });
    await purgeRetracted(svc.rt);
    expect(await unpurged()).toEqual([]);
  });
});

describe('a copy of a part torn in the part cache (S3: the store holds it whole)', () => {
  let emulator: Emulator | undefined;
  let svc: TestService | undefined;
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  it('is fetched again, not reported as damage to the store', async () => {
    emulator = await startEmulator();
    const config = await testConfig('aws', emulator);
    svc = await startTestService(await testRuntime(config, emulator));
    for (const id of IDS) expect((await postReport(svc.url, report(id, { created_at: `2026-11-21T0${id}:00:00Z` }))).status).toBe(201);
    await allArchived(svc.rt);
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    expect(await verify(svc.rt, DAY)).toMatchObject({ ok: true, damagedParts: [] });
    // The day's part as the cache copied it for that verify, torn.
    const [part] = await partsOfDayIn(svc!.rt);
    const base = part!.key.slice(part!.key.lastIndexOf('/') + 1, -'.parquet'.length);
    const copies = (await fs.readdir(config.cacheDir, { recursive: true })).map(String).filter((f) => f.includes(base) && !f.includes('ranged'));
    expect(copies).toHaveLength(1);
    const copy = path.join(config.cacheDir, copies[0]!);
    const bytes = await fs.readFile(copy);
    bytes[Math.floor(bytes.length / 3)] = bytes[Math.floor(bytes.length / 3)]! ^ 0x5a;
    await fs.writeFile(copy, bytes);
    expect(await verify(svc.rt, DAY)).toMatchObject({ ok: true, missing: [], damagedParts: [] });
    expect(await fs.readFile(copy)).toEqual((await svc.rt.store.get(part!.key))!.body);
  });
});
