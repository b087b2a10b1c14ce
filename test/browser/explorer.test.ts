// The explorer page in Debian's Chromium, driven by playwright-core, against the real
// service with reports posted through the feed and the PSA/NAMRIA barangays published.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { tableFromIPC } from 'apache-arrow';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HAS_SHARED_PH,
  SHARED_PH_MISSING,
  allArchived,
  getJson,
  postAccepted,
  report,
  startTestService,
  tempDir,
  testConfig,
  testRuntime,
  type TestService,
} from '../support/env.js';
import { loadNationalBoundaries, loadPsaBoundaries } from '../support/sharedData.js';

// Globals of the page, used only inside callbacks that playwright runs there.
declare const document: any, window: any, location: any, getComputedStyle: any;

const CHROMIUM = '/usr/bin/chromium';
const HAS_CHROMIUM = fs.existsSync(CHROMIUM);
if (!HAS_CHROMIUM) console.warn(`skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
if (!HAS_SHARED_PH) console.warn(SHARED_PH_MISSING);
const SHOTS = path.resolve('test-results', 'explorer');
const run = promisify(execFile);

// [lat, lng]: inside QC and Pampanga barangays, and outside both cities.
const PLACES: [number, number][] = [
  [14.6516, 121.0497],
  [14.6549, 121.0645],
  [14.6203, 121.0537],
  [14.6565, 121.0296],
  [15.0286, 120.6898],
  [15.1371, 120.5885],
  [15.2, 120.742],
  [14.5896, 120.9812],
];
const JUNE = Date.UTC(2025, 5, 1) - 8 * 3_600_000; // 2025-06-01 00:00 in Manila
const juneReports = Array.from({ length: 48 }, (_, i) => ({
  post_id: 70_000 + i,
  created_at: new Date(JUNE + 3_600_000 + i * 13 * 3_600_000).toISOString(),
  // Unequal counts (8, 6 and 5 a place), so that orders by count show.
  place: PLACES[i < 3 ? 0 : i % PLACES.length]!,
}));
const julyReports = Array.from({ length: 6 }, (_, i) => ({
  post_id: 71_000 + i,
  created_at: new Date(JUNE + 31 * 86_400_000 + i * 86_400_000).toISOString(),
  place: PLACES[i % PLACES.length]!,
}));
/** The service's URL, for helpers outside the suite. */
let svcUrl = '';
const JUNE_VIEW = '/?w=custom&start=2025-06-01T00%3A00&end=2025-06-30T23%3A59';
const JUNE_PARAMS = 'start=2025-06-01T00:00:00%2B0800&end=2025-06-30T23:59:59%2B0800';

describe.skipIf(!HAS_CHROMIUM || !HAS_SHARED_PH)('the explorer page in a browser', () => {
  let svc: TestService;
  let browser: Browser;

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    const rt = await testRuntime(await testConfig('embedded'));
    await rt.boundaries.publish(await loadPsaBoundaries());
    svc = await startTestService(rt);
    svcUrl = svc.url;
    for (const r of [...juneReports, ...julyReports]) {
      const [lat, lng] = r.place;
      const res = await postAccepted(svc.url, report(r.post_id, {
        created_at: r.created_at,
        location: { lat, lng },
        title: `Baha #${r.post_id}`,
        text: 'Hanggang tuhod <b>not bold</b>',
        image_url: 'https://example.org/flood.jpg',
      }));
      expect(res.status).toBe(201);
    }
    await allArchived(rt);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
  });

  /** A page that records console errors, page errors and every URL it requests. */
  async function openPage(viewport = { width: 1280, height: 900 }) {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const errors: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('request', (r) => requests.push(r.url()));
    return { page, errors, requests, close: () => context.close() };
  }

  async function settled(page: Page): Promise<string> {
    await page.waitForFunction(() => document.getElementById('status')?.dataset.state !== 'loading', undefined, { timeout: 30_000 });
    return (await page.getAttribute('#status', 'data-state'))!;
  }

  it('draws the window\'s reports as points and fills the barangays stats counts, with nothing from outside', async () => {
    const { page, errors, requests, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      await page.screenshot({ path: path.join(SHOTS, 'june-points.png') });
      expect(errors).toEqual([]);
      expect(requests.length).toBeGreaterThan(5);
      for (const url of requests) expect(new URL(url).hostname).toBe('127.0.0.1');

      const count = (await getJson(`${svc.url}/reports/archive/count?${JUNE_PARAMS}`)).body.result.count;
      expect(count).toBe(juneReports.length);
      expect(await page.locator('#map path.point').count()).toBe(count);
      expect(await page.textContent('#status')).toContain(`${count} reports`);

      const stats = (await getJson(`${svc.url}/reports/archive/stats?${JUNE_PARAMS}&interval=month&by=local_area`)).body.result;
      const want = new Map<string, number>();
      for (const r of stats.rows) if (r.key) want.set(r.key, (want.get(r.key) ?? 0) + r.count);
      const drawn = await page.$$eval('path.area', (paths) =>
        paths
          .filter((p) => Number((p as any).dataset.count) > 0 && Number(p.getAttribute('fill-opacity')) > 0)
          .map((p) => [/area-(\d+)/.exec(p.getAttribute('class') ?? '')![1]!, Number((p as any).dataset.count)] as [string, number]),
      );
      expect(new Map(drawn)).toEqual(want);
      expect(await page.locator('#legend .swatch').count()).toBeGreaterThan(0);

      // The same counts as text (the lightest fills are hard to tell from the ground): the busiest
      // barangays first, each named with its city, at most 100 of them.
      const names = new Map<string, string>();
      for (const city of (await getJson(`${svc.url}/cities?geoformat=geojson`)).body.result.features) {
        const areas = (await getJson(`${svc.url}/cities/${city.properties.code}/local-areas?geoformat=geojson`)).body.result.features;
        for (const a of areas) names.set(a.properties.psgc, `${a.properties.name}, ${city.properties.name}`);
      }
      const table = [...want].map(([psgc, n]) => [names.get(psgc)!, n.toLocaleString('en')]).sort((a, b) => Number(b[1]) - Number(a[1]));
      await page.click('#area-table summary');
      const rows = await page.$$eval('#area-table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((c) => c.textContent)));
      // Fewer than 100: every one, the busiest first (ties in the browser's own order of names).
      expect(table.length).toBeLessThan(100);
      expect(rows.map((r) => r[1])).toEqual(table.map((r) => r[1]));
      expect(new Set(rows.map((r) => r.join('|')))).toEqual(new Set(table.map((r) => r.join('|'))));
      await page.locator('#map-panel').screenshot({ path: path.join(SHOTS, 'june-counts-table.png') });
      expect(await page.textContent('#area-table .note')).toBe('');
    } finally {
      await close();
    }
  });

  it('shows a report\'s details in a popup when its point is clicked', async () => {
    const { page, close } = await openPage();
    try {
      const one = juneReports[0]!;
      const at = new Date(Date.parse(one.created_at) + 8 * 3_600_000).toISOString().slice(0, 16);
      await page.goto(`${svc.url}/?w=custom&start=${at}&end=${at}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.locator('#map path.point').count()).toBe(1);
      // Where Leaflet drew the point, in page pixels; then a real click there.
      const xy = await page.evaluate(([lat, lng]) => {
        const p = (window as any).floodExplorer.map.latLngToContainerPoint([lat, lng]);
        const box = document.getElementById('map')!.getBoundingClientRect();
        return { x: box.left + p.x, y: box.top + p.y };
      }, one.place);
      await page.mouse.click(xy.x, xy.y);
      const popup = page.locator('.leaflet-popup-content');
      await popup.waitFor({ timeout: 5_000 });
      // The popup fades in and the map pans to show it whole: the screenshot waits for both.
      await page.waitForFunction(() => {
        const el = document.querySelector('.leaflet-popup');
        const map = document.getElementById('map')!.getBoundingClientRect();
        const box = el?.getBoundingClientRect();
        return el && getComputedStyle(el).opacity === '1' && box.left >= map.left && box.right <= map.right && box.top >= map.top;
      }, undefined, { timeout: 5_000 });
      const text = await popup.innerText();
      const manila = new Date(Date.parse(one.created_at) + 8 * 3_600_000).toISOString().slice(0, 16).replace('T', ' ');
      expect(text).toContain(`${manila} PHT`);
      expect(text).toContain(`${one.created_at.slice(0, 16).replace('T', ' ')} UTC`);
      expect(text).toContain(`Baha #${one.post_id}`);
      expect(text).toContain('Hanggang tuhod <b>not bold</b>'); // shown as text, never as markup
      expect(text).toContain('Quezon City');
      expect(await popup.locator('a[href="https://example.org/flood.jpg"]').count()).toBe(1);
      await page.screenshot({ path: path.join(SHOTS, 'popup.png') });

      // The same from the keyboard: the point is a labelled button that Enter opens.
      await page.click('.leaflet-popup-close-button');
      await popup.waitFor({ state: 'detached', timeout: 5_000 });
      const point = page.getByRole('button', { name: `Report Baha #${one.post_id}` });
      await point.focus();
      await page.keyboard.press('Enter');
      await popup.waitFor({ timeout: 5_000 });
      expect(await popup.innerText()).toContain(`Baha #${one.post_id}`);
      // The focus is in the popup, a dialog named for its report; Escape closes it and the focus
      // is back on the point.
      expect(await page.evaluate(() => document.activeElement?.closest('.leaflet-popup')?.getAttribute('role'))).toBe('dialog');
      expect(await page.getAttribute('.leaflet-popup', 'aria-label')).toBe(`Report Baha #${one.post_id}`);
      await page.keyboard.press('Escape');
      await popup.waitFor({ state: 'detached', timeout: 5_000 });
      expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toMatch(new RegExp(`^Report Baha #${one.post_id},`));
      // So does its close button, reached from the keyboard.
      await page.keyboard.press('Enter');
      await popup.waitFor({ timeout: 5_000 });
      await page.keyboard.press('Enter');
      await popup.waitFor({ state: 'detached', timeout: 5_000 });
      expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toMatch(new RegExp(`^Report Baha #${one.post_id},`));
      // The areas' shapes are no stops of the Tab key (thousands nationally); the points in view are,
      // those out of view not.
      expect(await page.locator('path.area').count()).toBeGreaterThan(600);
      expect(await page.locator('path.area:not([tabindex="-1"])').count()).toBe(0);
      expect(await page.getAttribute('path.point', 'tabindex')).toBe('0');
      await page.evaluate(() => void (window as any).floodExplorer.map.setView([7, 125], 9, { animate: false }));
      expect(await page.getAttribute('path.point', 'tabindex')).toBe('-1');
    } finally {
      await close();
    }
  });

  it('keeps a report\'s popup within a phone\'s map, clear of the zoom buttons', async () => {
    const { page, close } = await openPage({ width: 320, height: 640 });
    try {
      const one = juneReports[0]!;
      const at = new Date(Date.parse(one.created_at) + 8 * 3_600_000).toISOString().slice(0, 16);
      await page.goto(`${svc.url}/?w=custom&start=${at}&end=${at}`);
      expect(await settled(page)).toBe('ready');
      await page.getByRole('button', { name: `Report Baha #${one.post_id},` }).focus();
      await page.keyboard.press('Enter');
      await page.locator('.leaflet-popup-content').waitFor({ timeout: 5_000 });
      await page.waitForFunction(() => {
        const el = document.querySelector('.leaflet-popup');
        const map = document.getElementById('map')!.getBoundingClientRect();
        const zoom = document.querySelector('.leaflet-control-zoom')!.getBoundingClientRect();
        const box = el?.getBoundingClientRect();
        return el && getComputedStyle(el).opacity === '1' && box.left >= map.left && box.right <= map.right && box.top >= map.top && box.left >= zoom.right;
      }, undefined, { timeout: 5_000 });
    } finally {
      await close();
    }
  });

  it('narrows the window when a range is dragged on the chart, and the map follows', async () => {
    const { page, errors, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      // The canvas's gist, for a screen reader: the total and the busiest bucket.
      expect(await page.getAttribute('#chart', 'role')).toBe('img');
      expect(await page.getAttribute('#chart', 'aria-label')).toMatch(new RegExp(`^Reports per day from .+: ${juneReports.length} in all, the most \\(2\\) in the day from .+\\.$`));
      const box = (await page.locator('#chart .u-over').boundingBox())!;
      const y = box.y + box.height / 2;
      await page.mouse.move(box.x + box.width * 0.25, y);
      await page.mouse.down();
      await page.mouse.move(box.x + box.width * 0.4, y, { steps: 8 });
      await page.mouse.move(box.x + box.width * 0.5, y, { steps: 8 });
      await page.mouse.up();
      await page.waitForFunction(() => !location.search.includes('start=2025-06-01T00%3A00'));
      expect(await settled(page)).toBe('ready');
      const state = new URL(page.url()).searchParams;
      expect(state.get('w')).toBe('custom');
      const start = Date.parse(`${state.get('start')}:00+08:00`);
      const end = Date.parse(`${state.get('end')}:59+08:00`);
      expect(start).toBeGreaterThan(JUNE + 5 * 86_400_000);
      expect(end).toBeLessThan(JUNE + 20 * 86_400_000);
      expect(end).toBeGreaterThan(start);
      const inWindow = juneReports.filter((r) => Date.parse(r.created_at) >= start && Date.parse(r.created_at) <= end).length;
      expect(inWindow).toBeGreaterThan(0);
      expect(await page.locator('#map path.point').count()).toBe(inWindow);
      expect(await page.textContent('#download-count')).toBe(`${inWindow} reports in this window.`);
      await page.screenshot({ path: path.join(SHOTS, 'after-drag.png') });
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });

  it('gives download links that each return as many reports as the count shown', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}/?w=year&year=2025&admin=PH-QC`);
      expect(await settled(page)).toBe('ready');
      const shown = Number(/^([\d,]+) report/.exec((await page.textContent('#download-count'))!)![1]!.replace(/,/g, ''));
      const inQc = [...juneReports, ...julyReports].filter((r) => r.place[0] < 14.7 && r.place[1] > 121).length;
      expect(shown).toBe(inQc);
      const links = await page.$$eval('#download-links a', (as) => as.map((a) => [a.textContent!, (a as any).href] as [string, string]));
      expect(links.map(([name]) => name)).toEqual(['GeoJSON', 'TopoJSON', 'CSV', 'NDJSON', 'Parquet', 'Arrow']);
      // Each exact URL is in view beside its link, labelled, to copy into a script.
      for (const [name, href] of links) expect(await page.getByLabel(`${name} URL`).inputValue()).toBe(href);
      const dir = await tempDir();
      for (const [name, href] of links) {
        expect(new URL(href).hostname).toBe('127.0.0.1');
        const res = await fetch(href, { headers: { 'User-Agent': 'explorer-tests/1.0' } });
        expect(res.status, name).toBe(200);
        const bytes = Buffer.from(await res.arrayBuffer());
        expect(await countReports(name, bytes, dir), name).toBe(shown);
      }
    } finally {
      await close();
    }
  });

  it('keeps its state in the URL: reload, back and a shared link give the same view', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}/?w=year&year=2025&admin=PH-PG`);
      expect(await settled(page)).toBe('ready');
      const view = async () => ({
        w: await page.locator('input[name=w]:checked').getAttribute('value'),
        year: await page.inputValue('input[name=year]'),
        admin: await page.inputValue('select[name=admin]'),
        count: await page.textContent('#download-count'),
      });
      const pampanga = await view();
      expect(pampanga).toMatchObject({ w: 'year', year: '2025', admin: 'PH-PG' });
      await page.reload();
      expect(await settled(page)).toBe('ready');
      expect(await view()).toEqual(pampanga);

      // Change the city with the keyboard only, then submit.
      await page.focus('select[name=admin]');
      await page.selectOption('select[name=admin]', 'PH-QC');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Show');
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => location.search.includes('admin=PH-QC'));
      expect(await settled(page)).toBe('ready');
      expect((await view()).count).not.toBe(pampanga.count);

      await page.goBack();
      await page.waitForFunction(() => location.search.includes('admin=PH-PG'));
      expect(await settled(page)).toBe('ready');
      expect(await view()).toEqual(pampanga);

      const shared = await openPage();
      try {
        await shared.page.goto(page.url());
        expect(await settled(shared.page)).toBe('ready');
        expect(await shared.page.textContent('#download-count')).toBe(pampanga.count);
      } finally {
        await shared.close();
      }
    } finally {
      await close();
    }
  });

  it('presets give the last 24 hours, 7 days and 30 days up to now, and a calendar year in Manila time', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}/?w=24h`);
      await settled(page);
      const windowOf = async () => {
        const href = (await page.getAttribute('#download-links a[data-format=CSV]', 'href'))!;
        const q = new URL(href).searchParams;
        return [Date.parse(q.get('start')!.replace(/(\d{2})(\d{2})$/, '$1:$2')), Date.parse(q.get('end')!.replace(/(\d{2})(\d{2})$/, '$1:$2'))] as const;
      };
      for (const [label, w, days] of [['Last 24 h', '24h', 1], ['Last 7 days', '7d', 7], ['Last 30 days', '30d', 30]] as const) {
        await page.getByLabel(label).check();
        await page.click('button[type=submit]');
        await page.waitForFunction((want) => new URLSearchParams(location.search).get('w') === want, w);
        await settled(page);
        const [start, end] = await windowOf();
        expect(Math.abs(end - Date.now()), label).toBeLessThan(120_000);
        expect(end - start, label).toBe(days * 86_400_000);
      }
      await page.getByLabel('A year').check();
      await page.fill('input[name=year]', '2025');
      await page.click('button[type=submit]');
      await page.waitForFunction(() => location.search.includes('year=2025'));
      expect(await settled(page)).toBe('ready');
      expect(await windowOf()).toEqual([Date.parse('2025-01-01T00:00:00+08:00'), Date.parse('2025-12-31T23:59:59+08:00')]);
      expect(await page.textContent('#download-count')).toBe(`${juneReports.length + julyReports.length} reports in this window.`);
    } finally {
      await close();
    }
  });

  it('under the national boundaries, opens on the regions, draws provinces, cities and barangays as it zooms in, each with its counts', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    await rt.boundaries.publish(await loadNationalBoundaries());
    const national = await startTestService(rt);
    const { page, errors, requests, close } = await openPage();
    try {
      for (const r of juneReports.slice(0, 4)) {
        const [lat, lng] = r.place;
        expect((await postAccepted(national.url, report(r.post_id, { created_at: r.created_at, partner_city: 'Quezon City', title: `Baha #${r.post_id}`, location: { lat, lng } }))).status).toBe(201);
      }
      await allArchived(rt);
      const regionOf = (await rt.boundaries.current()).tagger;
      const perRegion = new Map<string, number>();
      for (const r of juneReports.slice(0, 4)) {
        const code = regionOf.tag(r.place[1], r.place[0]).region_code!;
        perRegion.set(code, (perRegion.get(code) ?? 0) + 1);
      }
      await page.goto(`${national.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#boundary-label')).toMatch(/: 17 regions, 88 provinces, 1,642 cities and municipalities; barangays drawn when you zoom in$/);
      // On a phone the place list (a region's long name among its options) stays within the screen.
      const phone = await openPage({ width: 375, height: 800 });
      try {
        await phone.page.goto(`${national.url}${JUNE_VIEW}`);
        expect(await settled(phone.page)).toBe('ready');
        expect(await phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      } finally {
        await phone.close();
      }
      // The country opens on its 17 regions, each with its count; nothing finer fetched or drawn.
      expect(await page.getAttribute('#map', 'data-level')).toBe('region');
      expect(await page.locator('path.region').count()).toBe(17);
      for (const [code, n] of perRegion) expect(await page.getAttribute(`path.region-${code}`, 'data-count')).toBe(String(n));
      expect(await page.locator('path.city').count()).toBe(0);
      expect(await page.textContent('#legend')).toMatch(/^Reports per region:/);
      // Neither a city's barangays nor the full outlines of /cities (4 MB nationally).
      expect(requests.filter((u) => u.includes('/local-areas') || u.includes('/cities?'))).toEqual([]);
      expect(requests.filter((u) => u.includes('by=')).map((u) => new URL(u).searchParams.get('by'))).toEqual(['region']);
      await page.screenshot({ path: path.join(SHOTS, 'national.png') });
      // A report's popup before its city's barangay names are loaded: its barangay by code, not "outside".
      const first = juneReports[0]!;
      const psgc = regionOf.tag(first.place[1], first.place[0]).local_area_id!;
      await page.getByRole('button', { name: `Report Baha #${first.post_id},` }).focus();
      await page.keyboard.press('Enter');
      const popup = page.locator('.leaflet-popup-content');
      await popup.waitFor({ timeout: 5_000 });
      expect(await popup.innerText()).toContain(`PSGC ${psgc}`);
      expect(await popup.innerText()).not.toContain('outside');
      await page.click('.leaflet-popup-close-button');
      // Closer: the provinces, then the cities and municipalities, each level's counts asked once.
      // (Each move returns nothing: the map object back would be serialised whole, for seconds.)
      const zoomTo = (zoom: number) => page.evaluate((z) => void (window as any).floodExplorer.map.setView([14.6516, 121.0497], z), zoom);
      await zoomTo(7.5);
      await page.waitForFunction(() => document.getElementById('map')!.dataset.level === 'province' && document.querySelectorAll('path.province').length === 88);
      await page.waitForFunction(() => document.querySelector('#legend')!.textContent!.startsWith('Reports per province:'));
      await zoomTo(9.5);
      await page.waitForFunction(() => document.getElementById('map')!.dataset.level === 'city' && document.querySelectorAll('path.city').length === 1642);
      await page.waitForFunction(() => Number(document.querySelector('path.city-PH-1381300000')?.getAttribute('data-count')) > 0);
      expect(requests.filter((u) => u.includes('by=')).map((u) => new URL(u).searchParams.get('by'))).toEqual(['region', 'province', 'city']);
      // Zoomed in on Quezon City with the mouse wheel, about the pointer: its barangays.
      // A notch at a time (about one zoom level), until the barangays are the level in view.
      for (let i = 0; i < 12 && (await page.getAttribute('#map', 'data-level')) !== 'local_area'; i++) {
        const box = (await page.locator('path.city-PH-1381300000').boundingBox())!;
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
        await page.mouse.wheel(0, -100);
        await page.waitForTimeout(700);
      }
      await page.waitForSelector('path.area-1381300020');
      expect(await page.getAttribute('#map', 'data-level')).toBe('local_area');
      const fetched = requests.filter((u) => u.includes('/local-areas'));
      expect(fetched.some((u) => u.includes('/cities/PH-1381300000/local-areas'))).toBe(true);
      expect(fetched.length).toBeLessThanOrEqual(40);
      // The barangays where the reports are take their counts.
      await page.waitForFunction(() => document.querySelector('path.area-1381300020')?.getAttribute('data-count') !== '0');
      await page.screenshot({ path: path.join(SHOTS, 'national-zoomed.png') });
      // Every region, province and city in the list and the search; a place found by name, accents
      // and case aside: the map goes there and draws its barangays.
      expect(await page.locator('select[name=admin] option').count()).toBe(1 + 17 + 88 + 1642);
      expect(await page.locator('#place-names option').count()).toBe(17 + 88 + 1642);
      // A city by its common name ("Cebu City" is the City of Cebu, not the province of Cebu).
      await page.fill('input[name=place]', 'Cebu City');
      await page.press('input[name=place]', 'Enter');
      await page.waitForFunction(() => document.querySelectorAll('path[class*="area-07306"]').length > 0, undefined, { timeout: 30_000 });
      expect(requests.some((u) => u.includes('/cities/PH-0730600000/local-areas'))).toBe(true);
      // Said in the search's live region too, for whoever does not see the map move.
      expect(await page.getAttribute('#place-result', 'role')).toBe('status');
      expect(await page.textContent('#place-result')).toBe('The map shows City of Cebu.');
      // Found from a middle zoom, far off (a move the map animates): the map ends over the city,
      // close enough for its barangays, not at the old centre.
      const view = () =>
        page.evaluate(() => {
          const map = (window as any).floodExplorer.map;
          return { zoom: map.getZoom() as number, centre: map.getCenter() as { lat: number; lng: number } };
        });
      await page.evaluate(() => void (window as any).floodExplorer.map.setView([12.5, 122], 8, { animate: false }));
      await page.fill('input[name=place]', 'Quezon City');
      await page.press('input[name=place]', 'Enter');
      let at = await view();
      for (let i = 0; i < 50 && !(at.zoom >= 11 && regionOf.tag(at.centre.lng, at.centre.lat).instance_region_code === 'PH-1381300000'); i++) {
        await page.waitForTimeout(100);
        at = await view();
      }
      expect(at.zoom).toBeGreaterThanOrEqual(11);
      expect(regionOf.tag(at.centre.lng, at.centre.lat).instance_region_code).toBe('PH-1381300000');
      // A city of Metro Manila by the name it goes by.
      await page.fill('input[name=place]', 'Makati');
      await page.press('input[name=place]', 'Enter');
      await page.waitForFunction(() => document.querySelectorAll('path[class*="area-13803"]').length > 0, undefined, { timeout: 30_000 });
      // A phone with little memory (0.25 GB, as the browser says: 1,000 barangays kept besides those
      // in view) keeps the barangays of the cities it saw last: those seen before go, and are
      // fetched and drawn again when seen again.
      const small = await openPage({ width: 375, height: 800 });
      try {
        await small.page.addInitScript(() => Object.defineProperty(window.navigator, 'deviceMemory', { get: () => 0.25 }));
        await small.page.goto(`${national.url}${JUNE_VIEW}`);
        expect(await settled(small.page)).toBe('ready');
        await small.page.waitForFunction(() => document.querySelector('select[name=admin] option[value="PH-0730600000"]') !== null, undefined, { timeout: 30_000 });
        const drawnNow = () => small.page.locator('path.area').evaluateAll((paths) => paths.map((p) => /area-(\d+)/.exec(p.getAttribute('class') ?? '')![1]!));
        const goTo = (lat: number, lng: number) => small.page.evaluate(([la, ln]) => void (window as any).floodExplorer.map.setView([la, ln], 11, { animate: false }), [lat, lng]);
        const cebuAsked = () => small.requests.filter((u) => u.includes('/cities/PH-0730600000/local-areas')).length;
        await goTo(10.3157, 123.8854);
        await small.page.waitForSelector('path.area-0730600001', { state: 'attached', timeout: 30_000 });
        const atCebu = await drawnNow();
        expect(cebuAsked()).toBe(1);
        // Davao, then Iloilo: together with Cebu, more barangays than the phone keeps: Cebu's, seen
        // longest ago, go; those in view stay.
        await goTo(7.0731, 125.6128);
        await small.page.waitForSelector('path.area-1130700001', { state: 'attached', timeout: 30_000 });
        const atDavao = await drawnNow();
        await goTo(10.7202, 122.5621);
        await small.page.waitForSelector('path.area-0631000001', { state: 'attached', timeout: 30_000 });
        const kept = await drawnNow();
        expect(new Set([...atCebu, ...atDavao, ...kept]).size).toBeGreaterThan(1_000);
        expect(kept.filter((psgc) => atCebu.includes(psgc))).toEqual([]);
        expect(Number(await small.page.getAttribute('#map', 'data-areas'))).toBe(kept.length);
        // Back over Cebu: fetched and drawn again, with its counts.
        await goTo(10.3157, 123.8854);
        await small.page.waitForSelector('path.area-0730600001', { state: 'attached', timeout: 30_000 });
        expect(cebuAsked()).toBe(2);
        expect(small.errors).toEqual([]);
      } finally {
        await small.close();
      }
      // A province by name: the map shows it at the province level or closer.
      await page.fill('input[name=place]', 'Pampanga');
      await page.press('input[name=place]', 'Enter');
      await page.waitForFunction(() => document.getElementById('map')!.dataset.level !== 'region');
      // A name many places share is listed with each one's province, in the search and in the list:
      // no two entries read alike.
      for (const selector of ['#place-names option', 'select[name=admin] option']) {
        const labels = await page.locator(selector).evaluateAll((options) => options.map((o) => o.textContent));
        expect(new Set(labels).size, selector).toBe(labels.length);
        expect(labels, selector).toContain('San Jose (Batangas)');
        expect(labels.filter((l) => l!.startsWith('San Jose (')).length, selector).toBeGreaterThan(5);
      }
      await page.fill('input[name=place]', 'Nowhere Town');
      await page.press('input[name=place]', 'Enter');
      expect(await page.textContent('#place-result')).toMatch(/No place named “Nowhere Town”/);
      // A province as the window's place: its reports alone.
      await page.selectOption('select[name=admin]', 'PH-1307400000');
      await page.click('#window button[type=submit]');
      expect(await settled(page)).toBe('ready');
      expect(page.url()).toContain('admin=PH-1307400000');
      // Every request, at every zoom, went to the service alone.
      expect(requests.filter((u) => !u.startsWith(`${national.url}/`))).toEqual([]);
      expect(errors).toEqual([]);

      // A link's place is kept when another window is asked for before the lists of places are in.
      const slow = await openPage();
      try {
        await slow.page.route('**/cities/outlines?level=city*', async (route) => {
          await new Promise((r) => setTimeout(r, 4_000));
          await route.continue().catch(() => {});
        });
        await slow.page.goto(`${national.url}/?w=year&year=2025&admin=PH-1307400000`);
        await slow.page.fill('input[name=year]', '2024');
        await slow.page.click('#window button[type=submit]');
        await slow.page.waitForURL(/year=2024/);
        expect(slow.page.url()).toContain('admin=PH-1307400000');
      } finally {
        await slow.close();
      }
    } finally {
      await close();
      await national.stop();
    }
  }, 180_000);

  it('above EXPLORER_MAX_POINTS reports, shows the barangay counts alone and says why', async () => {
    const rt = await testRuntime(await testConfig('embedded', undefined, { EXPLORER_MAX_POINTS: '10' }));
    await rt.boundaries.publish(await loadPsaBoundaries());
    const few = await startTestService(rt);
    const { page, errors, close } = await openPage();
    try {
      for (const r of juneReports.slice(0, 12)) {
        const [lat, lng] = r.place;
        expect((await postAccepted(few.url, report(r.post_id, { created_at: r.created_at, location: { lat, lng } }))).status).toBe(201);
      }
      await allArchived(rt);
      await page.goto(`${few.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.locator('#map path.point').count()).toBe(0);
      expect(await page.textContent('#map-note')).toContain('12 reports: too many to draw one by one');
      expect(Number(await page.getAttribute('#map', 'data-filled'))).toBeGreaterThan(0);
      await page.screenshot({ path: path.join(SHOTS, 'choropleth-only.png') });
      // At or below the bound, points again.
      await page.goto(`${few.url}/?w=custom&start=2025-06-01T00%3A00&end=2025-06-03T23%3A59`);
      expect(await settled(page)).toBe('ready');
      expect(await page.locator('#map path.point').count()).toBeGreaterThan(0);
      expect(errors).toEqual([]);
    } finally {
      await close();
      await few.stop();
    }
  });

  it('shows a barangay name from the data as text in its tooltip, never as markup', async () => {
    const hostile = '<img src=x onerror="window.__injected=1">';
    const before = await svc.rt.boundaries.current();
    const [lat, lng] = PLACES[0]!;
    const psgc = before.tagger.tag(lng, lat).local_area_id!;
    const set = await loadPsaBoundaries();
    for (const f of set.localAreas.features) if (f.properties.psgc === psgc) f.properties.name = hostile;
    await svc.rt.boundaries.publish({ ...set, label: `${set.label}, one name hostile` });
    const { page, errors, close } = await openPage();
    try {
      // An empty window: no report points lie over the barangays, the pointer reaches them.
      await page.goto(`${svc.url}/?w=custom&start=2024-01-01T00%3A00&end=2024-01-31T23%3A59`);
      expect(await settled(page)).toBe('empty');
      const xy = await page.evaluate(([la, ln]) => {
        const p = (window as any).floodExplorer.map.latLngToContainerPoint([la, ln]);
        const box = document.getElementById('map')!.getBoundingClientRect();
        return { x: box.left + p.x, y: box.top + p.y };
      }, [lat, lng]);
      await page.mouse.move(xy.x, xy.y);
      const tooltip = page.locator('.leaflet-tooltip');
      await tooltip.waitFor({ timeout: 5_000 });
      expect(await tooltip.innerText()).toBe(`${hostile}: 0 reports`);
      expect(await page.locator('.leaflet-tooltip img').count()).toBe(0);
      expect(await page.evaluate(() => (window as any).__injected)).toBeUndefined();
      expect(errors).toEqual([]);
    } finally {
      await close();
      await svc.rt.boundaries.rollback(before.version);
    }
  });

  it('a shared link naming a place the boundaries published now lack shows every place and says why, refusing nothing', async () => {
    const { page, errors, requests, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}&admin=PH-ZZ`);
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#status')).toMatch(/^PH-ZZ is not among the places of the boundaries published now, so every place is shown\. \d+ reports? between/);
      expect(new URL(page.url()).searchParams.has('admin')).toBe(false);
      expect(await page.inputValue('select[name=admin]')).toBe('');
      expect(requests.filter((u) => u.includes('/reports/') && u.includes('PH-ZZ'))).toEqual([]);
      expect(errors).toEqual([]);
      await page.screenshot({ path: path.join(SHOTS, 'unknown-place.png') });
    } finally {
      await close();
    }
  });

  it('says so when the window is empty', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}/?w=custom&start=2024-01-01T00%3A00&end=2024-01-31T23%3A59`);
      expect(await settled(page)).toBe('empty');
      expect(await page.textContent('#status')).toContain('No reports in this window');
      expect(await page.locator('#map path.point').count()).toBe(0);
      await page.screenshot({ path: path.join(SHOTS, 'empty.png') });
    } finally {
      await close();
    }
  });

  it('says why a window is refused, and shows nothing of the window before', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#download-count')).not.toBe('');
      // Over ARCHIVE_MAX_WINDOW: the service's own reason, not only that the query is invalid.
      await page.goto(`${svc.url}/?w=custom&start=2024-01-01T00%3A00&end=2026-11-30T23%3A59`);
      expect(await settled(page)).toBe('error');
      expect(await page.textContent('#status')).toMatch(/366 days/);
      // A window that ends before it starts, after a good one: its count and links go, the places stay.
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      await page.getByLabel('Custom').check();
      await page.fill('input[name=start]', '2025-06-30T00:00');
      await page.fill('input[name=end]', '2025-06-01T00:00');
      await page.click('button[type=submit]');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state === 'error');
      expect(await page.textContent('#download-count')).toBe('');
      expect(await page.locator('#download-links a').count()).toBe(0);
      expect(Number(await page.getAttribute('#map', 'data-areas'))).toBeGreaterThan(0);
    } finally {
      await close();
    }
  });

  it('gets over a boundary request that failed once: the next window loads them', async () => {
    const { page, close } = await openPage();
    try {
      let refused = 0;
      await page.route('**/cities/*/local-areas*', (route) => (refused++ === 0 ? route.fulfill({ status: 429, headers: { 'Retry-After': '1', 'Content-Type': 'application/json' }, body: '{"statusCode":429,"message":"Too many requests"}' }) : route.continue()));
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('limited');
      await page.click('button[type=submit]');
      expect(await settled(page)).toBe('ready');
      expect(Number(await page.getAttribute('#map', 'data-areas'))).toBe(680);
      expect(await page.textContent('#boundary-label')).toMatch(/2 cities, 680 barangays/);
    } finally {
      await close();
    }
  });

  it('draws the map from the boundary version it began with when a publish comes while it loads', async () => {
    const before = await svc.rt.boundaries.current();
    const set = await loadPsaBoundaries();
    // The next version names Quezon City otherwise: a map of parts of both would list that name.
    const renamed = {
      ...set,
      label: `${set.label}, renamed`,
      cities: { ...set.cities, features: set.cities.features.map((f) => (f.properties.code === 'PH-QC' ? { ...f, properties: { ...f.properties, name: 'Lungsod Quezon' } } : f)) },
    };
    const { page, errors, requests, close } = await openPage();
    try {
      let published: string | undefined;
      // Published once the page has the levels, before it asks for the cities' outlines.
      await page.route(
        (url) => url.pathname === '/cities',
        async (route) => {
          published ??= (await svc.rt.boundaries.publish(renamed)).version;
          await route.continue();
        },
      );
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(published).toBeDefined();
      expect((await svc.rt.boundaries.current()).version).toBe(published);
      const names = await page.$$eval('select[name=admin] option', (options) => options.map((o) => o.textContent));
      expect(names).toContain('Quezon City');
      expect(names).not.toContain('Lungsod Quezon');
      expect(Number(await page.getAttribute('#map', 'data-areas'))).toBe(680);
      const boundaryRequests = requests.map((u) => new URL(u)).filter((u) => u.pathname.startsWith('/cities') && u.pathname !== '/cities/levels');
      expect(boundaryRequests.length).toBe(3);
      for (const u of boundaryRequests) expect(u.searchParams.get('version'), u.pathname).toBe(before.version);
      // The window's counts and points name it too (the areas of admin= and by= are that version's).
      const windowRequests = requests.map((u) => new URL(u)).filter((u) => u.pathname.startsWith('/reports/archive'));
      expect(windowRequests.length).toBeGreaterThanOrEqual(2);
      for (const u of windowRequests) expect(u.searchParams.get('version'), `${u.pathname}${u.search}`).toBe(before.version);
      // Its counts are of the areas it shows, which reports tagged since do not carry: it says so.
      expect(await page.textContent('#status')).toContain('The boundaries were updated since this map was drawn: reload the page to see them.');
      await page.reload();
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#status')).not.toContain('updated since');
      expect(errors).toEqual([]);
    } finally {
      await close();
      await svc.rt.boundaries.rollback(before.version);
    }
  });

  it('says on the next window that the boundaries were published again since its map was drawn', async () => {
    const before = await svc.rt.boundaries.current();
    const { page, errors, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#status')).not.toContain('updated since');
      const set = await loadPsaBoundaries();
      await svc.rt.boundaries.publish({ ...set, label: `${set.label}, again` });
      await page.click('button[type=submit]');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state === 'loading');
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#status')).toContain('The boundaries were updated since this map was drawn: reload the page to see them.');
      expect(errors).toEqual([]);
    } finally {
      await close();
      await svc.rt.boundaries.rollback(before.version);
    }
  });

  it("acknowledges the boundaries' makers on the map, as their attribution asks", async () => {
    // The default boundaries the service ships, with their PSA and NAMRIA attribution.
    const rt = await testRuntime(await testConfig('embedded'));
    const shipped = await startTestService(rt);
    const { page, close } = await openPage();
    try {
      const { attribution } = ((await (await fetch(`${shipped.url}/cities/levels`)).json()) as { result: { attribution: string } }).result;
      expect(attribution).toMatch(/PSA and NAMRIA/);
      await page.goto(`${shipped.url}/?w=24h`);
      await settled(page);
      expect(await page.textContent('.leaflet-control-attribution')).toContain(attribution);
    } finally {
      await close();
      await shipped.stop();
    }
  });

  it('says so when the rate limit is hit', async () => {
    // A service with a tiny read limit: the page's own requests run past it.
    const rt = await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_READ_PER_MINUTE: '4' }));
    const limited = await startTestService(rt);
    const { page, close } = await openPage();
    try {
      await page.goto(`${limited.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('limited');
      expect(await page.textContent('#status')).toMatch(/Too many requests from this address; try again in \d+ s/);
      await page.screenshot({ path: path.join(SHOTS, 'rate-limited.png') });
    } finally {
      await close();
      await limited.stop();
    }
  });

  it('says so when the server is down', async () => {
    // The page loaded, then the server went away. Then a window the page has not asked for
    // (answers it did ask for may rightly come from the browser's cache for a while).
    const rt = await testRuntime(await testConfig('embedded'));
    const doomed = await startTestService(rt);
    const { page, close } = await openPage();
    try {
      await page.goto(`${doomed.url}/?w=24h`);
      await settled(page);
      // Its counts known: none.
      await page.waitForFunction(() => document.querySelector('#area-table caption')!.textContent === 'No barangay has reports in this window.');
      await doomed.stop();
      await page.getByLabel('Last 7 days').check();
      await page.click('button[type=submit]');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state === 'error');
      expect(await page.textContent('#status')).toContain('not answering');
      // Nothing of the window shown before stays as if it were this one's.
      expect(await page.textContent('#download-count')).toBe('');
      expect(await page.locator('#download-links a').count()).toBe(0);
      expect(await page.locator('#snippet-lang').isVisible()).toBe(false);
      // Nor does the table of counts say the window has none: they are unknown.
      await page.waitForFunction(() => document.querySelector('#area-table caption')!.textContent === "The window's counts are not loaded.", undefined, { timeout: 5_000 });
      await page.screenshot({ path: path.join(SHOTS, 'server-down.png') });
    } finally {
      await close();
    }
  });

  it("says why a shared link's year or times cannot be a window, and Show still loads another one", async () => {
    const { page, errors, close } = await openPage();
    const shown = async (label: string, w: string) => {
      await page.getByLabel(label).check();
      await page.click('button[type=submit]');
      await page.waitForFunction((want) => new URLSearchParams(location.search).get('w') === want, w);
      expect(await settled(page)).not.toBe('error');
    };
    try {
      // A year past what a date can hold, then one the year field calls out of its range.
      await page.goto(`${svc.url}/?w=year&year=300000`);
      expect(await settled(page)).toBe('error');
      expect(await page.textContent('#status')).toContain('The year must be a whole number from 1971 to 9999.');
      await shown('Last 30 days', '30d');
      await page.goto(`${svc.url}/?w=year&year=2026.5`);
      expect(await settled(page)).toBe('error');
      await shown('Last 7 days', '7d');
      // Manila's year 1970 begins before the archive's first instant (1970-01-01T00:00Z).
      await page.goto(`${svc.url}/?w=year&year=1970`);
      expect(await settled(page)).toBe('error');
      expect(await page.textContent('#status')).toContain('The year must be a whole number from 1971 to 9999.');
      // Times to the second (the fields step by minutes): taken as they are, the end to its second, and Show goes on working.
      await page.goto(`${svc.url}/?w=custom&start=2025-06-01T00:00:30&end=2025-06-30T23:59:30`);
      expect(await settled(page)).toBe('ready');
      expect(await page.textContent('#status')).toContain('2025-06-30 23:59 PHT');
      await page.getByLabel('A year').check();
      await page.fill('input[name=year]', '2025');
      await page.click('button[type=submit]');
      await page.waitForFunction(() => location.search.includes('year=2025'));
      expect(await settled(page)).toBe('ready');
      // A year before 100 is not read as 19xx, and a 13th month does not roll over into the next year.
      for (const [start, end] of [['0050-01-01T00:00', '0050-01-02T00:00'], ['2025-13-01T00:00', '2025-13-02T00:00'], ['1970-01-01T07:00', '1970-01-02T00:00']]) {
        await page.goto(`${svc.url}/?w=custom&start=${start}&end=${end}`);
        expect(await settled(page)).toBe('error');
        expect(await page.textContent('#status')).toContain("The custom window's ends must be real times from 1970-01-01 08:00 to 9999-12-31 23:59, Manila time.");
      }
      await page.goto(`${svc.url}/?w=custom&start=1970-01-01T08:00&end=1970-01-02T00:00`);
      expect(await settled(page)).toBe('empty');
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });

  it('gives up a request the service never answers, says so, and shows nothing of the window before', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      expect(await page.locator('#map path.point').count()).toBeGreaterThan(0);
      await page.clock.install();
      // The series and counts of the next window are never answered.
      await page.route('**/reports/archive/stats?**', () => undefined);
      await page.getByLabel('Last 30 days').check();
      await page.click('button[type=submit]');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state === 'loading');
      // The window before's points go at once, not only once this one fails.
      expect(await page.locator('#map path.point').count()).toBe(0);
      await page.clock.fastForward(61_000);
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state === 'error', undefined, { polling: 100 });
      expect(await page.textContent('#status')).toContain('The service did not answer within 60 s');
      expect(await page.textContent('#download-count')).toBe('');
    } finally {
      await close();
    }
  });

  it("keeps a long report's popup within the map, scrolled, and lets the keyboard skip the points", async () => {
    const long = `${'baha sa kalye '.repeat(700)}${'x'.repeat(2_000)}`.slice(0, 10_000);
    const [lat, lng] = PLACES[0]!;
    expect((await postAccepted(svc.url, report(79_001, { created_at: '2023-03-10T02:00:00Z', location: { lat, lng }, title: 'y'.repeat(400), text: long }))).status).toBe(201);
    await allArchived(svc.rt);
    const { page, requests, close } = await openPage();
    try {
      await page.goto(`${svc.url}/?w=custom&start=2023-03-10T00%3A00&end=2023-03-10T23%3A59`);
      expect(await settled(page)).toBe('ready');
      const point = page.locator('#map path.point');
      await point.focus();
      await page.keyboard.press('Enter');
      const content = page.locator('.leaflet-popup-content');
      await content.waitFor({ timeout: 5_000 });
      const box = await content.evaluate((el: any) => ({ height: el.clientHeight, scrollHeight: el.scrollHeight, width: el.clientWidth, scrollWidth: el.scrollWidth }));
      const mapHeight = await page.locator('#map').evaluate((el: any) => el.clientHeight);
      expect(box.height).toBeLessThan(mapHeight);
      // Scrolled within, never cut off: every line is there to reach, and none runs out sideways.
      expect(box.scrollHeight).toBeGreaterThan(box.height);
      expect(box.scrollWidth).toBeLessThanOrEqual(box.width);

      // The skip link (the first stop before the map) leads past every point, to the chart and the
      // downloads, with the window as it is (a move within the page loads nothing again).
      const asked = () => requests.filter((u) => new URL(u).pathname.startsWith('/reports/archive')).length;
      const before = asked();
      await page.focus('a.skip');
      expect(await page.locator('a.skip').isVisible()).toBe(true);
      await page.keyboard.press('Enter');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => Boolean(document.activeElement?.closest('#chart-panel, #download-panel')))).toBe(true);
      await page.waitForTimeout(300);
      expect(asked()).toBe(before);
      expect(await page.locator('#map path.point').count()).toBe(1);
    } finally {
      await close();
    }
  });

  it('serves the API docs under the same security policy as the explorer, Swagger UI working within it', async () => {
    const { page, errors, close } = await openPage();
    try {
      const answer = await page.goto(`${svc.url}/docs/`);
      const headers = answer!.headers();
      expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(headers['content-security-policy']).toContain("script-src 'self'");
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['x-content-type-options']).toBe('nosniff');
      await page.locator('.opblock').first().waitFor({ timeout: 15_000 });
      expect(await page.locator('.opblock').count()).toBeGreaterThan(10);
      // A policy that blocked any of its scripts, styles or requests would be a console error.
      expect(errors).toEqual([]);
      const explorer = (await page.goto(`${svc.url}/`))!.headers();
      expect(explorer['content-security-policy']).toBe(headers['content-security-policy']);
    } finally {
      await close();
    }
  });

  it('is readable on a phone-width screen', async () => {
    const { page, errors, close } = await openPage({ width: 390, height: 844 });
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow).toBeLessThanOrEqual(0);
      for (const label of ['Last 24 h', 'Last 7 days', 'Last 30 days', 'A year', 'Custom']) {
        await expect(page.getByLabel(label).isVisible()).resolves.toBe(true);
      }
      await page.screenshot({ path: path.join(SHOTS, 'phone.png'), fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });

  it('gives Python snippets that work as pasted', async () => {
    const python = await run('python3', ['-c', 'import pandas, geopandas']).then(() => true, () => false);
    if (!python) {
      console.warn('snippets not run: python3 with pandas and geopandas is absent (pip install pandas geopandas)');
      return;
    }
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      for (const lang of ['pandas', 'geopandas']) {
        await page.selectOption('#snippet-lang', lang);
        const code = (await page.textContent('#snippet'))!;
        const { stdout } = await run('python3', ['-c', code], { timeout: 60_000 });
        expect(stdout.trim(), lang).toBe(lang === 'geopandas' ? `${juneReports.length} EPSG:4326` : String(juneReports.length));
      }
      // The frame holds the codes as the API gives them: Pampanga's begin with a 0.
      await page.selectOption('#snippet-lang', 'pandas');
      const pandas = (await page.textContent('#snippet'))!;
      const { stdout } = await run('python3', ['-c', `${pandas}\nprint(" ".join(sorted(df.local_area_id.dropna().unique())))`], { timeout: 60_000 });
      const codes = await juneCodes();
      expect(codes.some((c) => c.startsWith('0'))).toBe(true);
      expect(stdout.trim().split('\n').at(-1)!.split(' ')).toEqual(codes);
    } finally {
      await close();
    }
  });

  it('gives curl and R snippets that work as pasted', async () => {
    const { page, close } = await openPage();
    try {
      await page.goto(`${svc.url}${JUNE_VIEW}`);
      expect(await settled(page)).toBe('ready');
      await page.selectOption('#snippet-lang', 'curl');
      const curl = (await page.textContent('#snippet'))!;
      expect(curl).toMatch(/^curl -A '[^']+' -o flood-reports\.csv 'http:\/\/127\.0\.0\.1:\d+\/reports\/archive\?start=2025-06-01T00%3A00%3A00%2B0800&/);
      const dir = await tempDir();
      await run('sh', ['-c', curl], { cwd: dir, timeout: 60_000 });
      const csv = fs.readFileSync(path.join(dir, 'flood-reports.csv'), 'utf8');
      expect(csv.trimEnd().split('\n')).toHaveLength(juneReports.length + 1);

      const hasR = await run('Rscript', ['--version']).then(() => true, () => false);
      if (!hasR) {
        console.warn('R snippet not run: Rscript is absent (apt-get install -y r-base-core)');
        return;
      }
      await page.selectOption('#snippet-lang', 'r');
      const r = (await page.textContent('#snippet'))!;
      const { stdout } = await run('Rscript', ['-e', r], { timeout: 60_000 });
      expect(stdout.trim()).toBe(`[1] ${juneReports.length}`);
      // The codes as the API gives them, leading zeros kept.
      const { stdout: codes } = await run('Rscript', ['-e', `${r}\ncat(sort(unique(na.omit(reports$local_area_id))), sep = " ")`], { timeout: 60_000 });
      expect(codes.trim().split('\n').at(-1)!.replace(/^\[1\] \d+ ?/, '').split(' ')).toEqual(await juneCodes());
    } finally {
      await close();
    }
  });
});

/** The barangay codes of June's reports as the archive's NDJSON answer gives them, sorted. */
async function juneCodes(): Promise<string[]> {
  const res = await fetch(`${svcUrl}/reports/archive?${JUNE_PARAMS}&format=ndjson`, { headers: { 'User-Agent': 'explorer-tests/1.0' } });
  const lines = (await res.text()).split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { properties: { tags: { local_area_id: string | null } } }).properties.tags);
  return [...new Set(lines.map((l) => l.local_area_id).filter((c): c is string => c !== null))].sort();
}

/** Reports in a downloaded answer, read the way a researcher's tool would. */
async function countReports(format: string, bytes: Buffer, dir: string): Promise<number> {
  const text = () => bytes.toString('utf8');
  switch (format) {
    case 'GeoJSON': {
      const collection = JSON.parse(text());
      expect(collection.type).toBe('FeatureCollection');
      return collection.features.length;
    }
    case 'TopoJSON': {
      const topology = JSON.parse(text());
      expect(topology.type).toBe('Topology');
      return topology.objects.output.geometries.length;
    }
    case 'CSV':
      return text().trimEnd().split('\n').length - 1;
    case 'NDJSON':
      return text().trimEnd().split('\n').filter(Boolean).length;
    case 'Arrow':
      return tableFromIPC(bytes).numRows;
    case 'Parquet': {
      const file = path.join(dir, 'answer.parquet');
      fs.writeFileSync(file, bytes);
      const db = await DuckDBInstance.create(':memory:');
      const conn = await db.connect();
      try {
        const reader = await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM read_parquet('${file}')`);
        return Number(reader.getRowObjectsJS()[0]!.n);
      } finally {
        conn.closeSync();
        db.closeSync();
      }
    }
    default:
      throw new Error(`unknown format ${format}`);
  }
}
