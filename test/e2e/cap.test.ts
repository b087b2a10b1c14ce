// CAP 1.2: the Atom feed of the last 24 hours and each report's .cap document validate against
// the OASIS CAP 1.2 schema (schemas/cap, checked with libxml2's validator built to WebAssembly),
// carry the fields alerting systems read, and drop a retracted report; a retraction is also
// announced to webhook subscribers of "retracted". On both backends: the event log is SQLite on
// the embedded one and objects in the bucket on AWS (fauxqs), read by the API without the worker.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { convert } from 'xmlbuilder2';
import { validateXML } from 'xmllint-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSubscription } from '../../src/events/manage.js';
import { imageTypeOf } from '../../src/events/cap.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import Database from 'better-sqlite3';
import { allArchived, API_KEY, BACKENDS, eventually, getJson, HAS_SHARED_PH, postReport, report, SHARED_PH, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { pkeysOf, startReceiver, type Receiver } from '../support/webhookReceiver.js';

const XSD = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../schemas/cap/CAP-v1.2.xsd');
const SAN_FERNANDO = { lat: 15.0286, lng: 120.6898 };
const now = Date.now();
const recent = (minutesAgo: number) => new Date(now - minutesAgo * 60_000).toISOString();

async function validCap(xml: string): Promise<{ valid: boolean; errors: string[] }> {
  const result = await validateXML({ xml: { fileName: 'alert.xml', contents: xml }, schema: { fileName: 'CAP-v1.2.xsd', contents: await fs.readFile(XSD, 'utf8') } });
  return { valid: result.valid, errors: result.errors.map((e) => e.message) };
}

async function getText(url: string): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(url, { headers: { 'User-Agent': 'flood-tests/1.0' } });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/** The CAP alerts inside an Atom feed, each as a document of its own. */
function alertsOf(feed: string): string[] {
  return [...feed.matchAll(/<alert xmlns="urn:oasis:names:tc:emergency:cap:1\.2">[\s\S]*?<\/alert>/g)].map((m) => `<?xml version="1.0" encoding="UTF-8"?>\n${m[0]}`);
}

describe.each(BACKENDS)('CAP 1.2 (%s)', (backend) => {
  let svc: TestService;
  let hook: Receiver;
  let emulator: Emulator | undefined;
  beforeAll(async () => {
    if (backend === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(backend, emulator, { API_KEYS: `alpha:${API_KEY}`, WEBHOOK_ALLOW_HOSTS: '127.0.0.1' }), emulator));
    if (HAS_SHARED_PH) {
      const exit = await svc.rt.boundaries.publish({
        label: 'PSA/NAMRIA',
        cities: JSON.parse(await fs.readFile(path.join(SHARED_PH, 'cities.geojson'), 'utf8')),
        localAreas: JSON.parse(await fs.readFile(path.join(SHARED_PH, 'local-areas.geojson'), 'utf8')),
      });
      expect(exit.version).toBeTruthy();
    }
    hook = await startReceiver();
    await addSubscription(svc.rt, { url: hook.url, secret: 'a-webhook-secret-of-thirty-two-chars', admins: [], localAreas: [], events: ['retracted'] });
    const posts = [
      report(1, { created_at: recent(30), title: 'Baha sa <QMC> & "Elliptical"', text: 'Knee-deep water\nnear the school' }),
      report(2, { created_at: recent(90), image_url: 'https://images.example.org/2.jpg' }),
      report(3, { created_at: recent(45), partner_city: 'Pampanga', location: SAN_FERNANDO }),
      report(4, { created_at: recent(60 * 30) }), // older than a day
      report(5, { created_at: recent(10), location: { lat: 14.5896, lng: 120.9812 } }), // outside both cities
    ];
    for (const body of posts) expect((await postReport(svc.url, body)).status).toBe(201);
    await allArchived(svc.rt);
  });
  afterAll(async () => {
    await hook?.close();
    await svc?.stop();
    await emulator?.stop();
  });

  it('serves one valid CAP 1.2 alert per report of the last 24 hours, newest first, in an Atom feed', async () => {
    const res = await getText(`${svc.url}/reports/cap.atom`);
    expect(res.status).toBe(200);
    expect(res.type).toBe('application/atom+xml; charset=utf-8');
    const feed = convert(res.text, { format: 'object' }) as any;
    expect(feed.feed['@xmlns']).toBe('http://www.w3.org/2005/Atom');
    const entries = [feed.feed.entry].flat();
    expect(entries.map((e: any) => e.content.alert.identifier)).toEqual(['partner-alpha-5', 'partner-alpha-1', 'partner-alpha-3', 'partner-alpha-2']);
    expect(entries[0].link['@href']).toBe(`${svc.url}/reports/partner-alpha-5.cap`);
    expect(feed.feed.link['@rel']).toBe('self');
    const alerts = alertsOf(res.text);
    expect(alerts).toHaveLength(4);
    for (const a of alerts) {
      const check = await validCap(a);
      expect(check.errors).toEqual([]);
      expect(check.valid).toBe(true);
    }
    const cityOnly = await getText(`${svc.url}/reports/cap.atom?admin=PH-PG`);
    expect(alertsOf(cityOnly.text).map((a) => /<identifier>(.*)<\/identifier>/.exec(a)![1])).toEqual(['partner-alpha-3']);
    // An area's feed is chosen before its limit: on a busy day elsewhere (newer reports beyond
    // the feed's 1,000), the area's own reports are all still there. The log's query, at a limit of one.
    const newest = await svc.rt.feed.createdBetween(now - 86_400_000, now + 3_600_000, 1, ['PH-PG']);
    expect(newest.map((e) => e.pkey)).toEqual(['partner-alpha-3']);
  });

  it('answers a reader polling an unchanged feed with 304', async () => {
    const url = `${svc.url}/reports/cap.atom`;
    const ask = (etag?: string) => fetch(url, { headers: { 'User-Agent': 'flood-tests/1.0', ...(etag && { 'If-None-Match': etag }) } });
    let etag = (await ask()).headers.get('etag')!;
    expect(etag).toMatch(/^"/);
    let again = await ask(etag);
    // The two asked on either side of a minute's turn: the feed's 24 hours moved on, once.
    if (again.status === 200) {
      etag = again.headers.get('etag')!;
      again = await ask(etag);
    }
    expect(again.status).toBe(304);
    // A report archived since: the feed the reader revalidates is a new one, the report in it.
    expect((await postReport(svc.url, report(6, { created_at: recent(5) }))).status).toBe(201);
    await allArchived(svc.rt);
    const changed = await ask(etag);
    expect(changed.status).toBe(200);
    expect(alertsOf(await changed.text()).some((a) => a.includes('<identifier>partner-alpha-6</identifier>'))).toBe(true);
  });

  it('serves each report as a .cap document with the reference deployment\'s values', async () => {
    const res = await getText(`${svc.url}/reports/partner-alpha-1.cap`);
    expect(res.status).toBe(200);
    expect(res.type).toBe('application/cap+xml; charset=utf-8');
    // Cached as briefly as one report is (docs/http.md): a retraction shows within a minute.
    expect((await fetch(`${svc.url}/reports/partner-alpha-1.cap`, { headers: { 'User-Agent': 'flood-tests/1.0' } })).headers.get('cache-control')).toBe('public, no-cache');
    const typo = await getText(`${svc.url}/reports/partner-alpha-1.cap?format=xml`);
    expect([typo.status, JSON.parse(typo.text).details[0].field]).toEqual([400, 'format']);
    expect((await validCap(res.text)).valid).toBe(true);
    const alert = (convert(res.text, { format: 'object' }) as any).alert;
    expect(alert).toMatchObject({ identifier: 'partner-alpha-1', sender: 'flood-archive', status: 'Actual', msgType: 'Alert', scope: 'Public' });
    expect(alert.sent).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+08:00$/);
    expect(alert.info).toMatchObject({ category: 'Met', event: 'Flood', urgency: 'Immediate', severity: 'Unknown', certainty: 'Observed', description: 'Knee-deep water\nnear the school' });
    // Markup in a partner's title is text, escaped.
    expect(res.text).toContain('<headline>Baha sa &lt;QMC&gt; &amp; "Elliptical"</headline>');
    expect(alert.info.area.circle).toBe('14.6516,121.0497 0.1');
    if (HAS_SHARED_PH) {
      expect(alert.info.area.areaDesc).toMatch(/, Quezon City$/);
      expect(alert.info.area.geocode).toMatchObject({ valueName: 'PSGC' });
    } else {
      expect(alert.info.area.areaDesc).toBe('Quezon City');
    }
    const outside = (convert((await getText(`${svc.url}/reports/partner-alpha-5.cap`)).text, { format: 'object' }) as any).alert;
    expect(outside.info.area.areaDesc).toBe('Outside the covered cities (14.5896, 120.9812)');
    const photo = await getText(`${svc.url}/reports/partner-alpha-2.cap`);
    expect((await validCap(photo.text)).valid).toBe(true);
    expect(photo.text).toContain('<uri>https://images.example.org/2.jpg</uri>');
    // Its content type, as CAP asks, not a range such as image/*.
    expect(photo.text).toContain('<mimeType>image/jpeg</mimeType>');
    expect(['https://x.example/a.PNG?w=2', 'https://x.example/photo', 'https://x.example/a.webp#f'].map(imageTypeOf)).toEqual(['image/png', 'application/octet-stream', 'image/webp']);
  });

  it('the schema check fails a document that breaks CAP 1.2', async () => {
    const good = (await getText(`${svc.url}/reports/partner-alpha-3.cap`)).text;
    expect((await validCap(good)).valid).toBe(true);
    expect((await validCap(good.replace('<status>Actual</status>', '<status>Real</status>'))).valid).toBe(false);
    expect((await validCap(good.replace(/<sent>[^<]+<\/sent>/, '<sent>2026-11-21T05:05:00.123Z</sent>'))).valid).toBe(false);
  });

  it('answers 400, 404 and 405 in the error shape', async () => {
    const bad = await getJson(`${svc.url}/reports/cap.atom?admin=PH-XX&since=1`);
    expect(bad.status).toBe(400);
    expect(bad.body.details.map((d: any) => d.field).sort()).toEqual(['admin', 'since']);
    expect((await getJson(`${svc.url}/reports/partner-alpha-999.cap`)).status).toBe(404);
    expect((await getJson(`${svc.url}/reports/..%2Fetc.cap`)).status).toBe(400);
    expect((await fetch(`${svc.url}/reports/cap.atom`, { method: 'POST' })).status).toBe(405);
  });

  it('drops a retracted report from the feed (410 on its .cap), cancels its alert there, and announces the retraction without its personal fields', async () => {
    const sent = (convert((await getText(`${svc.url}/reports/partner-alpha-1.cap`)).text, { format: 'object' }) as any).alert.sent as string;
    const del = await fetch(`${svc.url}/feeds/partner/1`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    expect((await getJson(`${svc.url}/reports/partner-alpha-1.cap`)).status).toBe(410);
    const feed = await getText(`${svc.url}/reports/cap.atom`);
    expect(feed.text).not.toContain('<identifier>partner-alpha-1</identifier>');
    expect(feed.text).not.toContain('Knee-deep');
    expect(feed.text).not.toContain('Elliptical');
    // In its place a Cancel of that alert (CAP 1.2: references "sender,identifier,sent"), valid,
    // carrying nothing of the report; in its city's feed, not in another's.
    const cancels = alertsOf(feed.text).filter((a) => a.includes('<msgType>Cancel</msgType>'));
    expect(cancels).toHaveLength(1);
    const check = await validCap(cancels[0]!);
    expect(check.errors).toEqual([]);
    const cancel = (convert(cancels[0]!, { format: 'object' }) as any).alert;
    expect(cancel).toMatchObject({ identifier: 'partner-alpha-1.cancel', sender: 'flood-archive', status: 'Actual', msgType: 'Cancel', scope: 'Public', references: `flood-archive,partner-alpha-1,${sent}` });
    expect(cancel.info).toBeUndefined();
    expect(Date.parse(cancel.sent)).toBeGreaterThanOrEqual(Date.parse(sent));
    expect(feed.text).toContain(`<id>${svc.url}/reports/partner-alpha-1.cap#cancel</id>`);
    expect(alertsOf((await getText(`${svc.url}/reports/cap.atom?admin=PH-QC`)).text).some((a) => a.includes('<identifier>partner-alpha-1.cancel</identifier>'))).toBe(true);
    expect((await getText(`${svc.url}/reports/cap.atom?admin=PH-PG`)).text).not.toContain('partner-alpha-1');
    const got = await eventually(async () => (hook.received.length > 0 ? hook.received : undefined), 10_000, 'the retraction webhook');
    expect(pkeysOf(got[0]!.body)).toEqual(['partner-alpha-1']);
    const event = JSON.parse(got[0]!.body);
    expect(event.type).toBe('ph.floodarchive.report.retracted.v1');
    expect(event.data.features[0].properties).toMatchObject({ status: 'retracted', title: '', text: '', image_url: null });
    // A repeat retraction announces nothing new.
    await fetch(`${svc.url}/feeds/partner/1`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    await new Promise((r) => setTimeout(r, 600));
    expect(new Set(hook.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
  });

});

describe('a retraction the event log missed (embedded: its file locked by another process as the partner retracts)', () => {
  let svc: TestService;
  afterAll(async () => {
    await svc?.stop();
  });

  it('is announced by the next purge: its .cap answers 410, no longer the fields the partner took back', async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { API_KEYS: `alpha:${API_KEY}` })));
    expect((await postReport(svc.url, report(11, { created_at: recent(20), title: 'A title taken back' }))).status).toBe(201);
    await allArchived(svc.rt);
    const other = new Database(path.join(svc.rt.config.dataDir, 'events.sqlite'));
    other.exec('BEGIN IMMEDIATE');
    let answer: number;
    try {
      answer = (await fetch(`${svc.url}/feeds/partner/11`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status;
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    // The ledger holds the retraction; the log, which CAP and the stream read, does not.
    expect(answer).toBe(503);
    expect((await getJson(`${svc.url}/reports/partner-alpha-11`)).status).toBe(410);
    expect((await getText(`${svc.url}/reports/partner-alpha-11.cap`)).text).toContain('A title taken back');
    await purgeRetracted(svc.rt);
    const cap = await getText(`${svc.url}/reports/partner-alpha-11.cap`);
    expect([cap.status, cap.text]).toEqual([410, expect.not.stringContaining('A title taken back')]);
    expect(await svc.rt.feed.wasRetracted('partner-alpha-11')).toBe(true);
  }, 60_000);
});

describe('an event log damaged on a disk (embedded: an event whose stored JSON is cut)', () => {
  let svc: TestService;
  afterAll(async () => {
    await svc?.stop();
  });

  it('answers 503 where the event is read (the feed, the report\'s CAP), never a 500', async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { API_KEYS: `alpha:${API_KEY}` })));
    expect((await postReport(svc.url, report(12, { created_at: recent(20) }))).status).toBe(201);
    await allArchived(svc.rt);
    expect((await getText(`${svc.url}/reports/partner-alpha-12.cap`)).status).toBe(200);
    const file = new Database(path.join(svc.rt.config.dataDir, 'events.sqlite'));
    try {
      expect(file.prepare("UPDATE events SET feature = substr(feature, 1, 40) WHERE pkey = 'partner-alpha-12'").run().changes).toBeGreaterThan(0);
    } finally {
      file.close();
    }
    for (const url of [`${svc.url}/reports/cap.atom`, `${svc.url}/reports/partner-alpha-12.cap`]) {
      const res = await fetch(url, { headers: { 'User-Agent': 'flood-tests/1.0' } });
      const body = (await res.json()) as { statusCode: number; message: string };
      expect([url, res.status, body.statusCode, res.headers.get('retry-after')]).toEqual([url, 503, 503, expect.stringMatching(/^\d+$/)]);
    }
  }, 60_000);
});
