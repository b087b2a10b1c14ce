// GET /reports/stream: each archived report once as an SSE event, filters, heartbeats, the bound
// on clients, and resuming with Last-Event-ID across an API restart with the worker apart.
import type { IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/main/runtime.js';
import { createLogger } from '../../src/shared/log.js';
import { startService, type RunningService } from '../../src/main/service.js';
import type { Config } from '../../src/shared/config.js';
import { allArchived, BACKENDS, eventually, getJson, postReport, report, startTestService, testConfig, testRuntime, type BackendKind, type TestService, pkeyOf } from '../support/env.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { openStream, type SseClient } from '../support/sse.js';
import { archivedRow } from '../support/eventLogs.js';

const SAN_FERNANDO = { lat: 15.0286, lng: 120.6898 };
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function service(env: Record<string, string> = {}): Promise<TestService> {
  const svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, env)));
  cleanups.push(() => svc.stop());
  return svc;
}

async function stream(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const s = await openStream(url, headers);
  cleanups.push(() => s.close());
  return s;
}

/** A process of the given roles on a config's DATA_DIR (or bucket and queue). */
async function process(config: Config, roles: { api: boolean; worker: boolean }, emulator?: Emulator): Promise<RunningService & { close(): Promise<void> }> {
  const rt = await createRuntime(config, { log: createLogger('silent'), ...(emulator && { s3: emulator.s3, sqs: emulator.sqs }) });
  const svc = await startService(rt, { ...roles, reconcile: roles.worker, port: 0, host: '127.0.0.1', apiKeys: config.apiKeys });
  let stopped = false;
  const close = async () => {
    if (stopped) return;
    stopped = true;
    await svc.stop();
    await rt.close();
  };
  cleanups.push(close);
  return { ...svc, close };
}

const pkeys = (s: SseClient) => s.events.map((e) => JSON.parse(e.data).properties.pkey as string);

describe('GET /reports/stream', () => {
  it('sends each newly archived report once as a GeoJSON Feature, with increasing ids and heartbeats', async () => {
    const svc = await service({ STREAM_HEARTBEAT_SECONDS: '0.2' });
    const s = await stream(`${svc.url}/reports/stream`);
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(s.headers.get('cache-control')).toBe('no-store');
    for (const id of [1, 2, 3]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    await eventually(async () => (s.events.length === 3 ? true : undefined), 10_000, 'three events');
    expect(pkeys(s).sort()).toEqual([pkeyOf(1), pkeyOf(2), pkeyOf(3)]);
    expect(s.events.every((e) => e.event === 'archived')).toBe(true);
    const ids = s.events.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(JSON.parse(s.events[0]!.data)).toMatchObject({ type: 'Feature', geometry: { type: 'Point' }, properties: { disaster_type: 'flood', tags: { instance_region_code: 'PH-QC' } } });
    await eventually(async () => (s.comments.includes('heartbeat') ? true : undefined), 5_000, 'a heartbeat');
    // A repost of an archived report is not news.
    expect((await postReport(svc.url, report(1))).status).toBe(200);
    await new Promise((r) => setTimeout(r, 800));
    expect(s.events).toHaveLength(3);
  });

  it('holds about one event for a client that reads nothing, however many large events are due, and sends them all once it reads', async () => {
    const svc = await service();
    // Events of some 60 KB each (a control character is six bytes in JSON), 12 MB in all: more
    // than the sockets' buffers take.
    const text = '\u0001'.repeat(10_000);
    const count = 200;
    for (let id = 1; id <= count; id++) expect((await postReport(svc.url, report(id, { text }))).status).toBe(201);
    await allArchived(svc.rt);
    const answers: ServerResponse[] = [];
    svc.service.server!.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.url?.startsWith('/reports/stream')) answers.push(res);
    });
    // A client that asks for the whole log and then reads nothing.
    const socket = net.connect(Number(new URL(svc.url).port), '127.0.0.1');
    cleanups.push(() => void socket.destroy());
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.pause();
    socket.write('GET /reports/stream?lastEventId=0 HTTP/1.1\r\nHost: x\r\nUser-Agent: flood-tests/1.0\r\n\r\n');
    await eventually(async () => (answers.length === 1 ? true : undefined), 5_000, 'the stream answered');
    const answer = answers[0]!;
    // Its buffers fill: the service then holds what one event adds past them, not a batch's megabytes.
    let most = 0;
    await eventually(async () => {
      most = Math.max(most, answer.writableLength);
      return answer.writableNeedDrain ? true : undefined;
    }, 10_000, 'the client stops taking bytes');
    for (let i = 0; i < 20; i++) {
      most = Math.max(most, answer.writableLength);
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(most).toBeLessThan(256 * 1024);
    // Reading at last, the client gets every event once.
    let got = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (got += chunk));
    socket.resume();
    await eventually(async () => ((got.match(/\nevent: archived\n/g) ?? []).length === count ? true : undefined), 20_000, 'every event');
  });

  it('streams replaying a long log at once take turns at it, one read a turn of the event loop, so other requests are answered between', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    const count = 2_400;
    const start = Date.now() - 3_600_000;
    for (let n = 0; n < count; n += 400) await rt.feed.archived(Array.from({ length: 400 }, (_, i) => archivedRow(n + i + 1, start + n + i)));
    // Each read of the log, numbered by the turn of the event loop it came in.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    tick();
    const reads: number[] = [];
    const feed: typeof rt.feed = Object.assign(Object.create(rt.feed) as typeof rt.feed, {
      since: (seq: number, limit?: number) => {
        reads.push(turn);
        return rt.feed.since(seq, limit);
      },
    });
    const svc = await startTestService({ ...rt, feed }, { worker: false, reconcile: false });
    cleanups.push(() => svc.stop(), () => void (ticking = false));
    const streams = await Promise.all(Array.from({ length: 4 }, () => stream(`${svc.url}/reports/stream?lastEventId=0`)));
    await eventually(async () => (streams.every((s) => s.events.length === count) ? true : undefined), 30_000, 'every stream replayed');
    for (const s of streams) expect(new Set(pkeys(s)).size).toBe(count);
    // Four replays (as many as an address may open) of five batches each: never two reads in one turn.
    expect(reads.length).toBeGreaterThanOrEqual(4 * 5);
    expect(new Set(reads).size).toBe(reads.length);
  });

  it('filters by city and by bbox', async () => {
    const svc = await service();
    const pg = await stream(`${svc.url}/reports/stream?admin=PH-PG`);
    const box = await stream(`${svc.url}/reports/stream?bbox=121.0,14.6,121.1,14.7`);
    await postReport(svc.url, report(10));
    await postReport(svc.url, report(11, { partner_city: 'Pampanga', location: SAN_FERNANDO }));
    await postReport(svc.url, report(12, { location: { lat: 14.5896, lng: 120.9812 } }));
    await eventually(async () => (pg.events.length === 1 && box.events.length === 1 ? true : undefined), 10_000, 'filtered events');
    await new Promise((r) => setTimeout(r, 500));
    expect(pkeys(pg)).toEqual([pkeyOf(11)]);
    expect(pkeys(box)).toEqual([pkeyOf(10)]);
  });

  it('answers 429 past the bound on clients, and 400 on bad parameters', async () => {
    const svc = await service({ STREAM_MAX_CLIENTS: '1' });
    const one = await stream(`${svc.url}/reports/stream`);
    expect(one.status).toBe(200);
    const two = await getJson(`${svc.url}/reports/stream`);
    expect(two.status).toBe(429);
    expect(two.headers.get('retry-after')).toBe('30');
    expect(two.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests' });
    one.close();
    const again = await eventually(async () => {
      const s = await stream(`${svc.url}/reports/stream`);
      return s.status === 200 ? s : undefined;
    }, 5_000, 'a freed slot');
    again.close();

    const bad = await getJson(`${svc.url}/reports/stream?admin=PH-XX&bbox=1,2,3&since=4`, { 'Last-Event-ID': 'abc' });
    expect(bad.status).toBe(400);
    expect(bad.body.details.map((d: { field: string }) => d.field).sort()).toEqual(['Last-Event-ID', 'admin', 'bbox', 'since']);
    // A bad lastEventId is a mistake even beside a good header.
    const both = await getJson(`${svc.url}/reports/stream?lastEventId=abc`, { 'Last-Event-ID': '3' });
    expect([both.status, both.body.details]).toEqual([400, [{ in: 'query', field: 'lastEventId', message: expect.stringMatching(/whole number/) }]]);
    expect((await getJson(`${svc.url}/reports/stream?bbox=10,10,5,5`)).status).toBe(400);
    const post = await fetch(`${svc.url}/reports/stream`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    // A HEAD is answered as its GET would be, without the stream: its headers, or its 400.
    const head = await fetch(`${svc.url}/reports/stream?admin=PH-QC`, { method: 'HEAD' });
    expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'text/event-stream; charset=utf-8', '']);
    const badHead = await fetch(`${svc.url}/reports/stream?admin=NOPE`, { method: 'HEAD' });
    expect(badHead.status).toBe(400);
  });
});

describe('GET /reports/stream, one client among many', () => {
  it('allows an address only so many streams: past them 429, while another address still connects', async () => {
    const svc = await service({ TRUST_PROXY: '1', STREAM_MAX_CLIENTS_PER_ADDRESS: '2' });
    const from = (address: string) => ({ 'X-Forwarded-For': address });
    // HEADs open no stream: they take no slot.
    for (let i = 0; i < 3; i++) expect((await fetch(`${svc.url}/reports/stream`, { method: 'HEAD', headers: from('203.0.113.5') })).status).toBe(200);
    const held = [await stream(`${svc.url}/reports/stream`, from('203.0.113.5')), await stream(`${svc.url}/reports/stream`, from('203.0.113.5'))];
    expect(held.map((s) => s.status)).toEqual([200, 200]);
    const third = await fetch(`${svc.url}/reports/stream`, { headers: from('203.0.113.5') });
    // (A stream, were it opened, is not read to its end.)
    const body = third.status === 429 ? await third.json() : await third.body?.cancel();
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('30');
    expect(body).toMatchObject({ statusCode: 429, error: 'Too Many Requests', message: expect.stringMatching(/this address/i), details: [] });
    // A HEAD is answered as its GET would be.
    expect((await fetch(`${svc.url}/reports/stream`, { method: 'HEAD', headers: from('203.0.113.5') })).status).toBe(429);
    const other = await stream(`${svc.url}/reports/stream`, from('198.51.100.9'));
    expect(other.status).toBe(200);
    // A closed stream gives its address the slot back.
    held[0]!.close();
    const again = await eventually(async () => {
      const s = await stream(`${svc.url}/reports/stream`, from('203.0.113.5'));
      return s.status === 200 ? s : undefined;
    }, 5_000, 'a freed slot');
    expect(again.status).toBe(200);
  });

  it('gives the slot back of a client that hangs up before its stream starts (AWS: where it starts is a listing away)', async () => {
    const emulator = await startEmulator();
    cleanups.push(() => emulator.stop());
    const svc = await startTestService(await testRuntime(await testConfig('aws', emulator, { TRUST_PROXY: '1', STREAM_MAX_CLIENTS_PER_ADDRESS: '2' }), emulator));
    cleanups.push(() => svc.stop());
    const { port } = new URL(svc.url);
    // Each request sent and its connection closed at once: the server learns of the hang-up while
    // it reads where the stream starts, before it writes anything.
    for (let i = 0; i < 6; i++) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => {
          socket.end('GET /reports/stream HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.6\r\n\r\n');
          socket.destroy();
        });
        socket.on('error', () => undefined).on('close', () => resolve());
      });
    }
    // Not one of them holds a slot: the address gets its two streams.
    const from = { 'X-Forwarded-For': '203.0.113.6' };
    const streams = await eventually(async () => {
      const two = [await stream(`${svc.url}/reports/stream`, from), await stream(`${svc.url}/reports/stream`, from)];
      if (two.every((s) => s.status === 200)) return two;
      for (const s of two) s.close();
      return undefined;
    }, 5_000, 'two streams for the address');
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
  });

  it('resumes a Last-Event-ID past the newest event (an id from before the log was reset) from the newest: new reports still come', async () => {
    const svc = await service({ FLUSH_INTERVAL_SECONDS: '0.1' });
    const s = await stream(`${svc.url}/reports/stream`, { 'Last-Event-ID': '999999999999' });
    expect(s.status).toBe(200);
    expect((await postReport(svc.url, report(400))).status).toBe(201);
    await eventually(async () => (pkeys(s).includes(pkeyOf(400)) ? true : undefined), 10_000, 'the new report on the stream');
  });

  it('ends a stream at its lifetime; the client reconnecting with Last-Event-ID gets every report once', async () => {
    const svc = await service({ STREAM_MAX_LIFETIME_SECONDS: '0.5', FLUSH_INTERVAL_SECONDS: '0.1' });
    // A client as EventSource is: on the end of a stream, reconnect with the last id it was sent.
    let current = await stream(`${svc.url}/reports/stream`);
    expect(current.status).toBe(200);
    const earlier: string[] = [];
    let connections = 1;
    let following = true;
    let followFailed: unknown;
    // While a reconnection is under way, the ended stream's reports are in `earlier` and still in
    // `current`: counted once, from `earlier`.
    let reconnecting = false;
    const follow = (async () => {
      while (following) {
        await current.ended;
        if (!following) return;
        earlier.push(...pkeys(current));
        const lastEventId = current.lastEventId;
        expect(lastEventId).toMatch(/^\d+$/);
        reconnecting = true;
        current = await stream(`${svc.url}/reports/stream`, { 'Last-Event-ID': lastEventId! });
        reconnecting = false;
        expect(current.status).toBe(200);
        connections += 1;
      }
    })().catch((err: unknown) => {
      followFailed = err;
    });
    const first = current;
    const posted: string[] = [];
    for (let id = 300; id < 316; id++) {
      expect((await postReport(svc.url, report(id))).status).toBe(201);
      posted.push(pkeyOf(id));
      await new Promise((r) => setTimeout(r, 100));
    }
    const counted = () => earlier.length + (reconnecting ? 0 : pkeys(current).length);
    await eventually(async () => (followFailed || counted() >= posted.length ? true : undefined), 15_000, 'every report');
    following = false;
    current.close();
    await follow;
    if (followFailed) throw followFailed;
    // The first stream was ended by the server, not by the client.
    expect(first.comments.some((c) => /ends after 0.5 s/.test(c))).toBe(true);
    expect(connections).toBeGreaterThan(1);
    const received = [...earlier, ...pkeys(current)];
    expect(received.sort()).toEqual(posted.sort());
  });
});

// The API learns of new reports from the event log alone: SQLite on the embedded backend, the
// bucket's events/v1/log/ on AWS (fauxqs), with the worker in a process of its own.
describe.each(BACKENDS)('GET /reports/stream across processes (%s)', (backend: BackendKind) => {
  it('resumes after Last-Event-ID across an API restart, with the worker in its own process: no gap, no duplicate', async () => {
    const emulator = backend === 'aws' ? await startEmulator() : undefined;
    if (emulator) cleanups.push(() => emulator.stop());
    const config = await testConfig(backend, emulator);
    // The bucket and queue exist before the processes start (bootstrap).
    if (emulator) await (await testRuntime(config, emulator)).close();
    await process(config, { api: false, worker: true }, emulator);
    const api1 = await process(config, { api: true, worker: false }, emulator);
    const first = await stream(`${api1.url}/reports/stream`);
    for (const id of [101, 102, 103]) expect((await postReport(api1.url!, report(id))).status).toBe(201);
    await eventually(async () => (first.events.length === 3 ? true : undefined), 10_000, 'first three');
    const lastSeen = first.events.at(-1)!.id!;
    // The API process goes away; its stream ends, reports keep coming to another one.
    await api1.close();
    await first.ended;
    const api2 = await process(config, { api: true, worker: false }, emulator);
    for (const id of [104, 105]) expect((await postReport(api2.url!, report(id))).status).toBe(201);
    const resumed = await stream(`${api2.url}/reports/stream`, { 'Last-Event-ID': lastSeen });
    for (const id of [106]) expect((await postReport(api2.url!, report(id))).status).toBe(201);
    await eventually(async () => (resumed.events.length === 3 ? true : undefined), 10_000, 'the rest');
    expect(pkeys(resumed).sort()).toEqual([pkeyOf(104), pkeyOf(105), pkeyOf(106)]);
    expect([...pkeys(first), ...pkeys(resumed)]).toHaveLength(6);
    // From the beginning of what is kept: everything, once.
    const all = await stream(`${api2.url}/reports/stream?lastEventId=0`);
    await eventually(async () => (all.events.length === 6 ? true : undefined), 10_000, 'all six');
    expect(new Set(pkeys(all)).size).toBe(6);
  });
});
