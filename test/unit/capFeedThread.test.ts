// A large CAP feed is built on a thread of its own (the API's main thread stays free for other
// requests): the same document, byte for byte, as the calling thread builds, names included.
import { describe, expect, it } from 'vitest';
import { capFeed } from '../../src/events/cap.js';
import { capFeedOffThread } from '../../src/events/capFeedThread.js';
import type { ReportFeature } from '../../src/events/feature.js';

function alert(i: number) {
  const feature: ReportFeature = {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: [121.04 + i / 10_000, 14.65] },
    properties: {
      pkey: `partner-${i}`, created_at: new Date(Date.UTC(2026, 10, 21, 5, i % 60)).toISOString(), source: 'partner', status: 'confirmed', url: null, image_url: null,
      disaster_type: 'flood', report_data: { flood_depth: i }, title: `Flood <${i}> & "water"`, text: 'baha sa kalye '.repeat(40),
      tags: { instance_region_code: i % 3 === 0 ? null : i % 3 === 1 ? 'PH-QC' : 'PH-XX', local_area_id: i % 2 === 0 ? '1380100001' : null, province_code: null, region_code: null },
    },
  };
  return { feature, sentMs: Date.UTC(2026, 10, 21, 6, 0, i), url: `https://floods.example.org/reports/partner-${i}.cap` };
}

describe('the CAP feed built on a thread', () => {
  it('is the document the calling thread builds, with the areas named as there', async () => {
    const names = { city: (c: string) => (c === 'PH-QC' ? 'Quezon City' : undefined), localArea: (a: string) => (a === '1380100001' ? 'Alicia' : undefined) };
    const feed = { self: 'https://floods.example.org/reports/cap.atom', title: 'Flood reports of the last 24 hours', sinceMs: Date.UTC(2026, 10, 20, 6) };
    const now = Date.UTC(2026, 10, 21, 6, 30);
    for (const count of [3, 200]) {
      const alerts = Array.from({ length: count }, (_, i) => alert(i));
      const built = await capFeedOffThread(feed, alerts, names, now);
      expect(built).toBe(capFeed(feed, alerts, names, now));
      expect(built.split('<entry>').length - 1).toBe(count);
    }
    expect(await capFeedOffThread(feed, [alert(1), ...Array.from({ length: 60 }, (_, i) => alert(i + 2))], names, now)).toContain('Quezon City');
  });
});
