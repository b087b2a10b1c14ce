// A partner's text in CAP: whatever it holds (markup, text shaped like an entity reference,
// characters XML cannot carry, carriage returns), every document is well-formed, valid CAP 1.2, and reads back as
// the text given, less the characters XML 1.0 has no place for.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { validateXML } from 'xmllint-wasm';
import { convert } from 'xmlbuilder2';
import { describe, expect, it } from 'vitest';
import { capDocument, capFeed, type AreaNames } from '../../src/events/cap.js';
import type { ReportFeature } from '../../src/events/feature.js';

const XSD = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../schemas/cap/CAP-v1.2.xsd');
const NAMES: AreaNames = { city: () => 'Quezon City', localArea: () => undefined };

function feature(title: string, text: string, imageUrl: string | null, [lng, lat]: [number, number] = [121.0497, 14.6516]): ReportFeature {
  return {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: [lng, lat] },
    properties: {
      pkey: 'partner-1', created_at: '2026-11-21T05:05:00.000Z', source: 'partner', status: 'confirmed', url: null, image_url: imageUrl,
      disaster_type: 'flood', report_data: null, tags: { instance_region_code: 'PH-QC', local_area_id: null, province_code: null, region_code: null }, title, text,
    },
  };
}

async function schemaErrors(xml: string): Promise<readonly unknown[]> {
  const result = await validateXML({ xml: { fileName: 'alert.xml', contents: xml }, schema: { fileName: 'CAP-v1.2.xsd', contents: await fs.readFile(XSD, 'utf8') } });
  return result.errors;
}

/** The text of the element at `xpath`, as libxml2 reads the document (a strict reader: no reference read twice). */
async function textAt(xml: string, xpath: string): Promise<string> {
  // Its stdout is what `normalization` gives back; the arguments are the query's own.
  const result = await validateXML({ xml: { fileName: 'doc.xml', contents: xml }, normalization: 'format', modifyArguments: () => ['--xpath', `string(${xpath})`, 'doc.xml'] });
  expect(result.errors).toEqual([]);
  // xmllint ends what it prints with a line feed.
  return result.normalized.slice(0, -1);
}

/** The path of the CAP element `name` (any namespace), under `under`. */
const el = (name: string, under = '/') => `${under}/*[local-name()="${name}"]`;

/** The text as XML 1.0 can carry it: its characters outside XML's Char production dropped, as the documents drop them. */
function inXml(s: string): string {
  return [...s].filter((c) => /[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u.test(c)).join('');
}

const HOSTILE = ['Baha&nbsp;sa QMC', 'Tom &amp; Jerry', '&#0; &#65; &#x41; &e; &', '<b>]]></b> & "quotes" \'', 'a\u0000b\u0008c\uFFFEd\uFFFF', '🌊 مرحبا ñ', 'line\rbreaks\r\nof\nall kinds\r'];

describe('CAP documents with a partner\'s text', () => {
  it('are well-formed and valid, and give back each title, text and URL as sent (less what XML cannot carry)', async () => {
    // The URLs as the feed takes them (no spaces), with what looks like references in their queries.
    const photo = 'https://x.example/a.jpg?w=2&amp;h=3&nbsp;&#0;';
    const web = 'https://archive.example/reports/partner-1.cap?a=1&amp;b=2';
    for (const s of HOSTILE) {
      const xml = capDocument({ feature: feature(`x${s}`, `y${s}`, photo), sentMs: Date.UTC(2026, 10, 21, 5, 6), url: web }, NAMES);
      expect(await schemaErrors(xml), s).toEqual([]);
      const info = el('info', el('alert', ''));
      const read = [await textAt(xml, el('headline', info)), await textAt(xml, el('description', info)), await textAt(xml, el('uri', el('resource', info))), await textAt(xml, el('web', info))];
      expect(read).toEqual([inXml(`x${s}`), inXml(`y${s}`), photo, web]);
    }
  });

  it('hold any text in a well-formed feed of many alerts, each read back as sent', async () => {
    // Any characters, and pieces of markup and references put together.
    const pieces = fc.constantFrom('&', 'amp;', 'nbsp;', '#0;', '#65;', 'e;', '<', '>', ']]>', '"', 'a', ' ', '\u0000', '\uFFFE', '\r', '\r\n', '🌊');
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: pieces, maxLength: 12 }));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(text, text), { minLength: 1, maxLength: 3 }), async (reports) => {
        const alerts = reports.map(([title, body], i) => ({ feature: feature(`t${title}`, `d${body}`, null), sentMs: Date.UTC(2026, 10, 21, 5, i), url: `https://archive.example/reports/partner-${i}.cap` }));
        const xml = capFeed({ self: 'https://archive.example/reports/cap.atom?admin=PH-QC&since=1', title: 'Flood reports & alerts', sinceMs: 0 }, alerts, NAMES, Date.UTC(2026, 10, 21, 6));
        expect((await validateXML({ xml: { fileName: 'feed.xml', contents: xml }, normalization: 'format' })).errors).toEqual([]);
        for (const [i, [title, body]] of reports.entries()) {
          const entry = `(${el('entry', el('feed', ''))})[${i + 1}]`;
          expect(await textAt(xml, el('title', entry))).toBe(inXml(`t${title}`));
          expect(await textAt(xml, el('description', el('info', el('alert', el('content', entry)))))).toBe(inXml(`d${body}`));
        }
      }),
      { numRuns: 25 },
    );
  });

  it('give a point near zero in decimal degrees, never in exponent notation', () => {
    const near = feature('x', '', null, [-0.0000002, 0.0000001]);
    near.properties.tags = { instance_region_code: null, local_area_id: null, province_code: null, region_code: null };
    const xml = capDocument({ feature: near, sentMs: Date.UTC(2026, 10, 21, 5, 6), url: 'https://archive.example/reports/partner-1.cap' }, { city: () => undefined, localArea: () => undefined });
    const alert = (convert(xml, { format: 'object' }) as any).alert;
    expect(alert.info.area.circle).toBe('0.0000001,-0.0000002 0.1');
    expect(alert.info.area.areaDesc).toBe('Outside the covered cities (0.0000001, -0.0000002)');
  });
});
