// The explorer's figures: /reports/archive/stats for a day, a month and a year (by city and by
// barangay), the first request (cold) and the median of repeats (warm); and the page's load
// to its first map paint in Debian's Chromium, where it is installed.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { Server } from './server.js';

type Row = Record<string, string | number>;

// Globals of the page, used only inside callbacks that playwright runs there.
declare const document: any;

const CHROMIUM = '/usr/bin/chromium';
const DAY_MS = 86_400_000;

function timedGet(url: string): Promise<{ ms: number; status: number; body: string }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'User-Agent': 'flood-bench/1.0', 'Accept-Encoding': 'identity' } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/**
 * Stats rows: each window and grouping asked once cold (a new process, every cache emptied),
 * then five times warm (the median).
 */
export async function statsScenario(start: () => Promise<Server>, cacheDir: string, startMs: number, days: number, groupings = ['city', 'local_area']): Promise<Row[]> {
  const endMs = startMs + days * DAY_MS - 1;
  const mid = startMs + Math.floor(days / 2) * DAY_MS;
  const windows: [string, number, number, string][] = [
    ['1 day', mid, mid + DAY_MS - 1, 'hour'],
    ['1 month', mid, mid + 30 * DAY_MS - 1, 'day'],
    [`${days} days`, startMs, endMs, 'week'],
  ];
  const rows: Row[] = [];
  for (const by of groupings) {
    for (const [label, from, to, interval] of windows) {
      await fsp.rm(cacheDir, { recursive: true, force: true });
      const server = await start();
      const url = `${server.url}/reports/archive/stats?start=${iso(from)}&end=${iso(to)}&interval=${interval}&by=${by}&tz=%2B0800`;
      const warm: number[] = [];
      let cold: Awaited<ReturnType<typeof timedGet>>;
      try {
        cold = await timedGet(url);
        if (cold.status !== 200) throw new Error(`stats answered ${cold.status}: ${cold.body.slice(0, 200)}`);
        for (let i = 0; i < 5; i++) warm.push((await timedGet(url)).ms);
      } finally {
        await server.stop();
      }
      const result = JSON.parse(cold.body).result;
      rows.push({ window: label, by, interval, reports: result.total, rows: result.rows.length, 'cold ms': Math.round(cold.ms), 'warm p50 ms': Math.round(median(warm)) });
    }
  }
  return rows;
}

/** Page load to the first map paint (the choropleth drawn) and to the whole view ready. */
export async function pageScenario(baseUrl: string, startMs: number, days: number): Promise<Row[]> {
  if (!fs.existsSync(CHROMIUM)) return [{ note: `no Chromium at ${CHROMIUM}: page figures not measured` }];
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  const rows: Row[] = [];
  try {
    const manila = (ms: number) => new Date(ms + 8 * 3_600_000).toISOString().slice(0, 16);
    const mid = startMs + Math.floor(days / 2) * DAY_MS;
    const views: [string, string][] = [
      // A quarter of a busy day holds fewer reports than the page draws as points.
      ['6 hours (points)', `/?w=custom&start=${manila(mid)}&end=${manila(mid + DAY_MS / 4 - 60_000)}`],
      [`${days} days (choropleth)`, `/?w=custom&start=${manila(startMs)}&end=${manila(startMs + days * DAY_MS - 60_000)}`],
    ];
    for (const [label, path] of views) {
      for (const run of ['first', 'again']) {
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        const page = await context.newPage();
        await page.goto(`${baseUrl}${path}`);
        await page.waitForFunction(() => !['loading'].includes(document.getElementById('status')?.dataset.state ?? 'loading'), undefined, { timeout: 120_000 });
        const t = await page.evaluate(() => ({
          paint: performance.getEntriesByName('explorer:map-painted')[0]?.startTime ?? NaN,
          ready: performance.now(),
          points: document.querySelectorAll('#map path.point').length,
        }));
        rows.push({ view: label, load: run, 'first map paint ms': Math.round(t.paint), 'ready ms': Math.round(t.ready), points: t.points });
        await context.close();
      }
    }
  } finally {
    await browser.close();
  }
  return rows;
}
