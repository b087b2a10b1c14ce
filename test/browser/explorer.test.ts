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
  postReport,
  report,
  startTestService,
  tempDir,
  testConfig,
  testRuntime,
  type TestService,
} from '../support/env.js';
import { loadPsaBoundaries } from '../support/sharedData.js';

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
  place: PLACES[i % PLACES.length]!,
}));
const julyReports = Array.from({ length: 6 }, (_, i) => ({
  post_id: 71_000 + i,
  created_at: new Date(JUNE + 31 * 86_400_000 + i * 86_400_000).toISOString(),
  place: PLACES[i % PLACES.length]!,
}));
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
    for (const r of [...juneReports, ...julyReports]) {
      const [lat, lng] = r.place;
      const res = await postReport(svc.url, report(r.post_id, {
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
          .filter((p) => Number((p as SVGElement).dataset.count) > 0 && Number(p.getAttribute('fill-opacity')) > 0)
          .map((p) => [/area-(\d+)/.exec(p.getAttribute('class') ?? '')![1]!, Number((p as SVGElement).dataset.count)] as [string, number]),
      );
      expect(new Map(drawn)).toEqual(want);
      expect(await page.locator('#legend .swatch').count()).toBeGreaterThan(0);
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
      const text = await popup.innerText();
      const manila = new Date(Date.parse(one.created_at) + 8 * 3_600_000).toISOString().slice(0, 16).replace('T', ' ');
      expect(text).toContain(`${manila} PHT`);
      expect(text).toContain(`${one.created_at.slice(0, 16).replace('T', ' ')} UTC`);
      expect(text).toContain(`Baha #${one.post_id}`);
      expect(text).toContain('Hanggang tuhod <b>not bold</b>'); // shown as text, never as markup
      expect(text).toContain('Quezon City');
      expect(await popup.locator('a[href="https://example.org/flood.jpg"]').count()).toBe(1);
      await page.screenshot({ path: path.join(SHOTS, 'popup.png') });
    } finally {
      await close();
    }
  });
});
