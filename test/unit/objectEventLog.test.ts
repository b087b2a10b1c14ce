// The event log on the object store (the AWS backend), on a real file store with a clock the test
// moves: what CAP reads of it (the last day's archived reports, and which were retracted) stays
// within the day it covers, however long the process runs.
import { describe, expect, it } from 'vitest';
import { featureOf } from '../../src/events/feature.js';
import { ObjectEventLog } from '../../src/events/objectEventLog.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const HOUR = 3_600_000;
const row = (n: number) =>
  ({
    pkey: `partner-${n}`, created_at_ms: Date.parse('2026-11-21T05:00:00Z'), source: 'partner', status: 'confirmed', url: null, image_url: null,
    disaster_type: 'flood', report_data: null, instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65,
    post_id: n, partner_city: 'Quezon City', received_at_ms: Date.parse('2026-11-21T05:00:00Z'), boundary_version: 'v',
  }) as ArchiveRow;

describe('the event log on the object store', () => {
  it('keeps what CAP reads to the last 25 hours: archived reports and retractions alike', async () => {
    let now = Date.parse('2026-11-21T06:00:00Z');
    const log = new ObjectEventLog(new FileObjectStore(await tempDir('flood-eventlog-')), () => now);
    await log.archived([row(1), row(2)]);
    await log.retracted(featureOf(row(2)));
    expect((await log.archivedReport('partner-1'))?.pkey).toBe('partner-1');
    expect(await log.archivedReport('partner-2')).toBeUndefined();
    expect(await log.wasRetracted('partner-2')).toBe(true);
    // A day and two hours later, in the same process: both have left what CAP covers.
    now += 26 * HOUR;
    await log.archived([row(3)]);
    expect(await log.archivedReport('partner-1')).toBeUndefined();
    expect(await log.wasRetracted('partner-2')).toBe(false);
    expect((await log.archivedReport('partner-3'))?.pkey).toBe('partner-3');
  });
});
