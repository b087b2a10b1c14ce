// /metrics: Prometheus counters move with what happens. They are served on a port of their own
// (METRICS_PORT), never on the public one: they name partners and their volumes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { API_KEY, eventually, OTHER_KEY, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  const env = { METRICS_PORT: '0', METRICS_HOST: '127.0.0.1', API_KEYS: `acme-floods:${API_KEY},${OTHER_KEY}` };
  svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, env)));
});
afterAll(async () => {
  await svc?.stop();
});

async function scrape(): Promise<string> {
  const res = await fetch(svc.metricsUrl!);
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
    // A mount spelt in any case (the router matches it so) is labelled as the routes name it.
    for (const spelling of ['/DOCS/', '/DoCs/']) expect((await fetch(`${svc.url}${spelling}`)).status).toBe(200);
    expect(await scrape()).not.toMatch(/route="\/D[oO][cC][sS]/);
  });

  it('counts requests whose client hung up: a stream (its only end), and a post gone before any answer (499)', async () => {
    const streams = () => scrape().then((t) => value(t, 'http_requests_total', 'route="/reports/stream",method="GET",status="200"'));
    const gone = () => scrape().then((t) => value(t, 'http_requests_total', 'route="/feeds/partner",method="POST",status="499"'));
    const [streamsBefore, goneBefore] = [await streams(), await gone()];
    const stream = new AbortController();
    const res = await fetch(`${svc.url}/reports/stream`, { signal: stream.signal });
    expect(res.status).toBe(200);
    stream.abort();
    // A post whose body never comes: the client leaves before the service could answer.
    const socket = net.connect(Number(new URL(svc.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"post_id":`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.destroy();
    await eventually(async () => ((await streams()) === streamsBefore + 1 && (await gone()) === goneBefore + 1 ? true : undefined));
  });

  it('counts a post whose body the HTTP parser refused with the refusal it was given (400), not as a client gone', async () => {
    const refused = () => scrape().then((t) => value(t, 'http_requests_total', 'route="/feeds/partner",method="POST",status="400"'));
    const [refusedBefore, goneBefore] = [await refused(), await scrape().then((t) => value(t, 'http_requests_total', 'route="/feeds/partner",method="POST",status="499"'))];
    const socket = net.connect(Number(new URL(svc.url).port), '127.0.0.1');
    const answer = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d) => (text += d.toString()));
      socket.on('close', () => resolve(text));
    });
    // A chunk size that is no hex number: the parser refuses the body part-way.
    socket.write(`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"pos\r\nzz\r\n`);
    expect(await answer).toMatch(/^HTTP\/1\.1 400 /);
    await eventually(async () => ((await refused()) === refusedBefore + 1 ? true : undefined));
    expect(value(await scrape(), 'http_requests_total', 'route="/feeds/partner",method="POST",status="499"')).toBe(goneBefore);
  });
});

describe('/metrics on the public port', () => {
  it('is not served there: 404 in the error shape, with no partner name or count in it', async () => {
    expect((await postReport(svc.url, report(50))).status).toBe(201);
    expect(await scrape()).toMatch(/partner_reports_total\{partner="acme-floods",outcome="accepted"\} [1-9]/);
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${svc.url}/metrics`, { method });
      const text = await res.text();
      expect(res.status).toBe(404);
      expect(text).not.toMatch(/acme-floods|partner_reports_total|reports_total/);
      if (method === 'GET') expect(JSON.parse(text)).toMatchObject({ statusCode: 404, error: 'Not Found' });
    }
  });

  it('nor anywhere when METRICS_PORT is unset', async () => {
    const plain = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    try {
      expect(plain.metricsUrl).toBeUndefined();
      expect((await fetch(`${plain.url}/metrics`)).status).toBe(404);
    } finally {
      await plain.stop();
    }
  });

  it('the metrics port serves /metrics alone', async () => {
    const other = await fetch(svc.metricsUrl!.replace('/metrics', '/reports/archive'));
    expect(other.status).toBe(404);
    const post = await fetch(svc.metricsUrl!, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});
