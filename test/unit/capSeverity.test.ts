// CAP severity as the reference deployment graded flood depths (its flood states: 10–70 cm Minor,
// 71–150 cm Moderate, above Severe, no level Unknown), and every graded alert still valid CAP 1.2.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateXML } from 'xmllint-wasm';
import { describe, expect, it } from 'vitest';
import { capDocument, capSeverity } from '../../src/events/cap.js';
import type { ReportFeature } from '../../src/events/feature.js';

const XSD = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../schemas/cap/CAP-v1.2.xsd');

function feature(reportData: unknown): ReportFeature {
  return {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: [121.0497, 14.6516] },
    properties: {
      pkey: 'partner-1', created_at: '2026-11-21T05:05:00.000Z', source: 'partner', status: 'confirmed', url: null, image_url: null,
      disaster_type: 'flood', report_data: reportData, tags: { instance_region_code: 'PH-QC', local_area_id: null, province_code: null, region_code: null }, title: '', text: '',
    },
  };
}

describe('CAP severity', () => {
  it('grades the flood depth in centimetres as the reference deployment did', () => {
    expect(capSeverity(feature(null))).toBe('Unknown');
    expect(capSeverity(feature({}))).toBe('Unknown');
    expect(capSeverity(feature({ flood_depth: 'deep' }))).toBe('Unknown');
    expect(capSeverity(feature({ flood_depth: 0 }))).toBe('Unknown');
    expect(capSeverity(feature({ flood_depth: 30 }))).toBe('Minor');
    expect(capSeverity(feature({ flood_depth: 70 }))).toBe('Minor');
    expect(capSeverity(feature({ flood_depth: 71 }))).toBe('Moderate');
    expect(capSeverity(feature({ flood_depth: 150 }))).toBe('Moderate');
    expect(capSeverity(feature({ flood_depth: 151 }))).toBe('Severe');
  });

  it('writes it into alerts that validate against the CAP 1.2 schema', async () => {
    const schema = { fileName: 'CAP-v1.2.xsd', contents: await fs.readFile(XSD, 'utf8') };
    const names = { city: () => 'Quezon City', localArea: () => undefined };
    for (const [depth, severity] of [[undefined, 'Unknown'], [40, 'Minor'], [120, 'Moderate'], [200, 'Severe']] as const) {
      const xml = capDocument({ feature: feature(depth === undefined ? null : { flood_depth: depth }), sentMs: Date.parse('2026-11-21T05:06:00Z'), url: 'https://example.org/reports/partner-1.cap' }, names);
      expect(xml).toContain(`<severity>${severity}</severity>`);
      expect(xml).toContain('<urgency>Immediate</urgency>');
      expect(xml).toContain('<certainty>Observed</certainty>');
      expect((await validateXML({ xml: { fileName: 'a.xml', contents: xml }, schema })).valid).toBe(true);
    }
  });
});
