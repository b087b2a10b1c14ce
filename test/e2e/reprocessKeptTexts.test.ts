// A reprocess after new boundaries that move none of a day's reports: the day's part is written
// again (its reports now carry the new version) with the old part's ready texts as they are, and
// a day where a tag moves, or where a report became a tombstone since, gets texts built anew.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { Tagger } from '../../src/boundaries/tagger.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { listWindowParts } from '../../src/archive/partListing.js';
import { readyKeyOf } from '../../src/archive/sidecars/keys.js';
import { parseIndex } from '../../src/archive/sidecars/readyFormat.js';
import { compact } from '../../src/ops/compact.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { DAY_MS } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, pkeyOf, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const FIRST_DAY = Date.parse('2026-11-23T00:00:00Z');
const WINDOW = { fromMs: FIRST_DAY, toMs: FIRST_DAY + 3 * DAY_MS - 1 };
const QUEZON_CITY = { lng: 121.0497, lat: 14.6516 };
const SAN_FERNANDO = { lng: 120.6898, lat: 15.0286 };
const PERSONAL = 'my name and my street';

/** Each day's ready texts as stored, in day order (a day's one part: hourly, or compacted when its reports straddled a flush). */
async function readyTextsByDay(svc: TestService): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for (const partition of await listWindowParts(svc.rt.store, WINDOW.fromMs, WINDOW.toMs)) {
    expect(partition.parts).toHaveLength(1);
    expect(Math.floor((partition.hourMs - FIRST_DAY) / DAY_MS)).toBe(out.length);
    const stored = await svc.rt.store.get(readyKeyOf(partition.parts[0]!.key));
    expect(stored, `ready texts of ${new Date(partition.hourMs).toISOString()}`).toBeDefined();
    out.push(stored!.body);
  }
  expect(out).toHaveLength(3);
  return out;
}

/** The GeoJSON items of a ready text, its sections inflated. */
function geojsonOf(ready: Buffer): string {
  const eol = ready.indexOf(10);
  const index = parseIndex(ready.subarray(0, eol).toString('utf8'))!;
  return index.hours.map((h) => gunzipSync(ready.subarray(eol + 1 + h.geojson[0], eol + 1 + h.geojson[1])).toString('utf8')).join(',\n');
}

describe.each(BACKENDS)('reprocess after boundaries that move no report of a day, on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator), emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  it('keeps that day’s ready texts byte for byte, and builds them anew for a day with a moved tag or a new tombstone', async () => {
    // The first day's report is in a barangay the new boundaries leave out; the second day's in
    // Pampanga, unchanged; the third day's too, beside one retracted after it was archived.
    const posts = [
      report(9700, { created_at: '2026-11-23T03:00:00Z', location: QUEZON_CITY }),
      report(9701, { created_at: '2026-11-24T05:00:00Z', location: SAN_FERNANDO }),
      report(9702, { created_at: '2026-11-25T07:00:00Z', location: SAN_FERNANDO }),
      report(9703, { created_at: '2026-11-25T07:20:00Z', location: SAN_FERNANDO, title: PERSONAL }),
    ];
    for (const body of posts) expect((await postReport(svc.url, body)).status).toBe(201);
    await allArchived(svc.rt);
    // A day whose reports straddled a flush (a loaded host) made one part.
    await compact(svc.rt, { ...WINDOW, closedBeforeMs: Date.now() });
    const before = await readyTextsByDay(svc);
    expect(geojsonOf(before[2]!)).toContain(PERSONAL);
    const del = await fetch(`${svc.url}/feeds/partner/9703`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY, 'User-Agent': 'flood-tests/1.0' } });
    expect(del.status).toBe(200);

    const two = await defaultBoundaries();
    const left = new Tagger(two).tag(QUEZON_CITY.lng, QUEZON_CITY.lat).local_area_id;
    expect(left).not.toBeNull();
    const fewer = { ...two, label: `${two.label}, one barangay left out`, localAreas: { ...two.localAreas, features: two.localAreas.features.filter((f) => f.properties.psgc !== left) } };
    expect((await svc.rt.boundaries.publish(fewer)).changed).toBe(true);

    const done = await reprocess(svc.rt, { ...WINDOW, dryRun: false });
    expect([done.hoursRewritten, done.readyTextsKept, done.localAreaChanges]).toEqual([3, 1, 1]);
    const after = await readyTextsByDay(svc);
    // The unchanged day: the old part's texts under the new part's key.
    expect(after[1]!.equals(before[1]!)).toBe(true);
    // The moved report's day: its texts (which answers read) give the new tags.
    expect(after[0]!.equals(before[0]!)).toBe(false);
    const res = await fetch(`${svc.url}/reports/archive?start=2026-11-23T00:00:00Z&end=2026-11-23T23:59:59Z&geoformat=geojson`, { headers: { 'User-Agent': 'flood-tests/1.0' } });
    const [moved] = ((await res.json()) as { result: { features: { properties: { pkey: string; tags: Record<string, string | null> } }[] } }).result.features;
    expect(moved!.properties.pkey).toBe(pkeyOf(9700));
    expect(moved!.properties.tags).toMatchObject({ instance_region_code: 'PH-QC', local_area_id: null });
    // The day with a report retracted since: built without it, nothing of it kept.
    const third = geojsonOf(after[2]!);
    expect(third).toContain(pkeyOf(9702));
    expect(third).not.toContain(PERSONAL);
    expect(third).not.toContain(pkeyOf(9703));
  }, 120_000);
});
