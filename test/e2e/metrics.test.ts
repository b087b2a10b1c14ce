// /metrics: Prometheus counters move with what happens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
});
afterAll(async () => {
  await svc?.stop();
});

async function scrape(): Promise<string> {
  const res = await fetch(`${svc.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

function value(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('/metrics', () => {
  it('counts accepted, duplicate and rejected reports, requests by route, flushes and archived reports', async () => {
    const before = await scrape();
    expect((await postReport(svc.url, report(1))).status).toBe(201);
    expect((await postReport(svc.url, report(2))).status).toBe(201);
    expect((await postReport(svc.url, report(1))).status).toBe(200);
    expect((await postReport(svc.url, report(3, { location: { lat: 99, lng: 0 } }))).status).toBe(400);
    const after = await eventually(async () => {
      const text = await scrape();
      return value(text, 'worker_reports_archived_total') >= 2 ? text : undefined;
    });
    expect(value(after, 'reports_total', 'outcome="accepted"') - value(before, 'reports_total', 'outcome="accepted"')).toBe(2);
    expect(value(after, 'reports_total', 'outcome="duplicate"') - value(before, 'reports_total', 'outcome="duplicate"')).toBe(1);
    expect(value(after, 'reports_total', 'outcome="rejected"') - value(before, 'reports_total', 'outcome="rejected"')).toBe(1);
    expect(value(after, 'http_requests_total', 'route="/feeds/partner",method="POST",status="201"')).toBe(2);
    expect(value(after, 'http_requests_total', 'route="/feeds/partner",method="POST",status="400"')).toBe(1);
    expect(value(after, 'worker_flush_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(value(after, 'worker_part_bytes_count')).toBeGreaterThanOrEqual(1);
    expect(after).toMatch(/^http_request_duration_seconds_bucket\{le="0.005",route="\/feeds\/partner",method="POST"\} \d+/m);
    expect(after).toMatch(/^queue_messages\{state="visible"\} \d+/m);
    expect(after).toMatch(/^process_resident_memory_bytes \d+/m);
  });

  it('labels unknown paths as unmatched, so clients cannot grow the label set', async () => {
    await fetch(`${svc.url}/random-${Date.now()}`);
    const text = await scrape();
    expect(text).toMatch(/http_requests_total\{route="unmatched",method="GET",status="404"\} [1-9]/);
    expect(text).not.toMatch(/route="\/random-/);
  });
});
