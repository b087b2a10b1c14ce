// A count of the reports received by an instant (the numberMatched of an OGC walk, fixed at its
// first page): a part written well before the instant holds none received after it, so its
// stats sidecar counts it and the part itself is not read; a part written since is counted by
// DuckDB, which reads its received_at. Either way the count is exact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive } from '../../src/archive/window.js';
import { archiveStates, SETTLE_MS } from '../../src/archive/changes.js';
import type { PartCache } from '../../src/archive/partCache.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, BACKENDS, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

describe.each(BACKENDS)('counting the reports received by an instant (%s)', (kind) => {
  let svc: TestService;
  let postedAt = 0;
  const DAY = { startMs: Date.parse('2026-11-18T00:00:00Z'), endMs: Date.parse('2026-11-18T23:59:59.999Z'), admin: undefined };
  beforeAll(async () => {
    const peer = kind === 'aws' ? emulator : undefined;
    svc = await startTestService(await testRuntime(await testConfig(kind, peer), peer));
    postedAt = Date.now();
    for (const [i, hour] of ['03', '05', '07', '09', '11'].entries()) {
      expect((await postReport(svc.url, report(300 + i, { created_at: `2026-11-18T${hour}:${10 + i}:00Z` }))).status).toBe(201);
    }
    await allArchived(svc.rt);
  });
  afterAll(async () => {
    await svc?.stop();
  });

  /** The count of the day's reports received by `receivedBeforeMs`, and the parts it read. */
  async function countReceivedBy(receivedBeforeMs: number): Promise<{ n: number; partsRead: string[] }> {
    const partsRead: string[] = [];
    const cache = new Proxy(svc.rt.cache, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'localFile') return typeof value === 'function' ? value.bind(target) : value;
        return (part: { key: string }, ...rest: unknown[]) => (partsRead.push(part.key), (target.localFile as (...a: unknown[]) => unknown)(part, ...rest));
      },
    }) as PartCache;
    const archive = new Archive(svc.rt.store, cache, svc.rt.db, archiveStates(svc.rt.ledger, svc.rt.changes));
    const n = await (await archive.open({ ...DAY, receivedBeforeMs })).count();
    return { n, partsRead };
  }

  it('counts parts written well before the instant from their stats sidecars, without reading them', async () => {
    // The instant a settling time after every part was written.
    const later = await countReceivedBy(Date.now() + 2 * SETTLE_MS);
    expect(later).toEqual({ n: 5, partsRead: [] });
  });

  it('counts parts written since the instant by DuckDB, exactly', async () => {
    const now = await countReceivedBy(Date.now());
    expect(now.n).toBe(5);
    expect(now.partsRead.length).toBeGreaterThan(0);
    // Before any was received: none, though every part has its sidecar.
    expect(await countReceivedBy(postedAt - 1)).toMatchObject({ n: 0 });
  });
});
