// SNS messages of archived reports in PublishBatch calls: SNS refuses a whole call past ten
// entries or past 256 KiB of messages and attributes together, and a relay that sent such a
// call would retry it for ever, holding every later announcement behind it.
import { describe, expect, it } from 'vitest';
import { batchesOf, messagesOf } from '../../src/events/snsPublisher.js';
import type { ReportFeature } from '../../src/events/feature.js';

/** `n` reports in each of `areas` barangays, each with a text of `textBytes`. */
function features(areas: number, n: number, textBytes: number): ReportFeature[] {
  const out: ReportFeature[] = [];
  for (let a = 0; a < areas; a++) {
    for (let i = 0; i < n; i++) {
      out.push({
        type: 'Feature',
        geometry: { type: 'Point', coordinates: [121.05, 14.65] },
        properties: { pkey: `partner-${a}-${i}`, text: 'x'.repeat(textBytes), tags: { instance_region_code: 'PH-QC', local_area_id: `13813000${String(a).padStart(2, '0')}` } },
      } as unknown as ReportFeature);
    }
  }
  return out;
}

const bytesOf = (batch: ReturnType<typeof messagesOf>) =>
  batch.reduce((n, e) => n + Buffer.byteLength(e.Message!) + Object.entries(e.MessageAttributes!).reduce((m, [k, v]) => m + k.length + v.DataType!.length + (v.StringValue ?? '').length, 0), 0);

describe('SNS batches', () => {
  it('keeps each call within 256 KiB: ten busy barangays of 50 reports go in several calls, every message once, in order', () => {
    // About 700 bytes a report: some 35 KB a message, ten of them well past 256 KiB.
    const entries = messagesOf(features(10, 50, 600));
    expect(entries).toHaveLength(10);
    expect(bytesOf(entries)).toBeGreaterThan(256 * 1024);
    const batches = batchesOf(entries);
    expect(batches.length).toBeGreaterThan(1);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(10);
      expect(bytesOf(batch)).toBeLessThanOrEqual(256 * 1024);
    }
    expect(batches.flat().map((e) => e.Id)).toEqual(entries.map((e) => e.Id));
  });

  it('puts at most ten small messages in a call', () => {
    const entries = messagesOf(features(25, 1, 20));
    expect(batchesOf(entries).map((b) => b.length)).toEqual([10, 10, 5]);
  });
});
