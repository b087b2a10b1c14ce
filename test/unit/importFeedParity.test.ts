// A body in the feed's own shape is judged by an import as the feed judges a post of it: the same
// verdict, the same reasons, the same report. Other systems' rows (CSV, CogniCity's) are read
// leniently, as operations.md says.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compactLevels } from '../../src/boundaries/compactLevels.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { PlaceNames, placesOf } from '../../src/boundaries/placeNames.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import { records } from '../../src/ops/importRecords.js';
import { emptyBatch, validateInto } from '../../src/ops/validateRecords.js';
import { InvalidReportError, parsePartnerReport } from '../../src/partners/partnerReport.js';
import { tempDir } from '../support/env.js';

const set = await defaultBoundaries();
const placeNames = new PlaceNames(placesOf(set));
const ctx = { tagger: new Tagger(compactLevels(set)), placeNames, partner: 'pasig-app' };

const base = { post_id: 7, created_at: '2026-12-01T10:00:00+08:00', partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 } };

/** Bodies a partner might post: each differs from `base` in one way. */
const bodies: Record<string, unknown>[] = [
  base,
  { ...base, title: 'Baha', text: 'Hanggang tuhod', image_url: 'https://example.org/a.jpg' },
  ...['2026-12-01 10:00:00+08:00', '2026-12-01T10:00:00+08', ' 2026-12-01T10:00:00Z ', '2026-12-01 02:00:00.5Z'].map((created_at) => ({ ...base, created_at })),
  { ...base, location: { lat: '14.65', lng: '121.05' } },
  { ...base, location: { lat: ' 14.65 ', lng: 121.05 } },
  { ...base, location: { lat: 14.65, lng: 121.05, alt: 3 } },
  { ...base, location: null },
  ...['title', 'text', 'image_url'].flatMap((field) => [null, '', false].map((value) => ({ ...base, [field]: value }))),
  ...[null, '', false].map((partner_city) => ({ ...base, partner_city })),
  Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'partner_city')),
  Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'location')),
];

/** What the feed makes of a body: its report, or the reasons it is refused. */
function feed(body: unknown): { report: unknown } | { reasons: string[] } {
  try {
    return { report: parsePartnerReport(body, Date.now(), placeNames) };
  } catch (err) {
    if (!(err instanceof InvalidReportError)) throw err;
    return { reasons: err.details.map((d) => `${d.field}: ${d.message}`) };
  }
}

/** What an import makes of a record: the report it keeps, or the reasons it rejects it. */
function imported(record: unknown): { report: unknown } | { reasons: string[] } {
  const out = emptyBatch();
  validateInto(out, 0, record, ctx);
  if (out.rejects.length > 0) return { reasons: out.rejects[0]!.reasons };
  return { report: JSON.parse(out.valid.json[0]!).report };
}

describe("an import's records against the feed", () => {
  it('judges a body in the feed’s shape as the feed does: verdict, reasons and report', () => {
    const verdicts = bodies.map((body) => ({ body, feed: feed(body), imported: imported(body) }));
    for (const v of verdicts) expect(v.imported, JSON.stringify(v.body)).toEqual(v.feed);
    // The corpus holds both kinds.
    expect(verdicts.filter((v) => 'report' in v.feed).length).toBeGreaterThanOrEqual(2);
    expect(verdicts.filter((v) => 'reasons' in v.feed).length).toBeGreaterThanOrEqual(15);
  });

  it('reads other systems’ rows leniently: a CSV row’s strings and PostgreSQL timestamp, a CogniCity point, an empty cell as no field', async () => {
    const dir = await tempDir('flood-parity-');
    const file = path.join(dir, 'rows.csv');
    await fs.writeFile(file, 'post_id,created_at,disaster_type,title,image_url,lat,lng\n8,2026-12-01 10:00:00+08,flood,Baha,,14.65,121.05\n');
    const rows: unknown[] = [];
    for await (const row of records(file, 'csv')) rows.push(row);
    expect(imported(rows[0])).toEqual({
      report: expect.objectContaining({ post_id: 8, created_at: '2026-12-01T02:00:00.000Z', partner_city: expect.any(String), title: 'Baha', location: { lat: 14.65, lng: 121.05 } }),
    });
    const cognicity = { post_id: 9, created_at: '2026-12-01 10:00:00+08', disaster_type: 'flood', title: null, the_geom: 'POINT (121.05 14.65)' };
    expect(imported(cognicity)).toEqual({ report: expect.objectContaining({ post_id: 9, created_at: '2026-12-01T02:00:00.000Z' }) });
  });
});
