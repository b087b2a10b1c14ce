// Slow clients: headers or a body sent a byte at a time, idle keep-alive connections and a
// slowloris of 200 connections are closed by the server's own timeouts (short ones here,
// set through the config), while other clients are still answered.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { expectErrorShape, parseRaw } from './support.js';

let svc: TestService;
beforeAll(async () => {
  const config = await testConfig('embedded', undefined, {
    HTTP_HEADERS_TIMEOUT_SECONDS: '1',
    HTTP_REQUEST_TIMEOUT_SECONDS: '2',
    HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: '1',
  });
  svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
});
afterAll(async () => {
  await svc?.stop();
});

/** A connection that sends `head` then one more byte of `drip` every 200 ms, for as long as it stays open. */
function slowClient(head: string, drip: string): { closed: Promise<string>; socket: net.Socket } {
  const { port } = new URL(svc.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  socket.on('connect', () => socket.write(head));
  let i = 0;
  const timer = setInterval(() => {
    if (!socket.destroyed) socket.write(drip[i++ % drip.length]!);
  }, 200);
  const closed = new Promise<string>((resolve) => {
    socket.once('close', () => {
      clearInterval(timer);
      resolve(received);
    });
  });
  return { closed, socket };
}

/** Resolves with the client's outcome, or 'still open' after `ms`: the bound that fails a server holding it for minutes. */
async function within<T>(ms: number, p: Promise<T>): Promise<T | 'still open'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still open'>((resolve) => (timer = setTimeout(() => resolve('still open'), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The server's answer to `client` once it closed the connection: `status`, in the error shape. */
async function expectClosedWith(client: { closed: Promise<string>; socket: net.Socket }, status: number): Promise<void> {
  const received = await within(10_000, client.closed);
  client.socket.destroy();
  expect(received).not.toBe('still open');
  const res = parseRaw(received as string);
  expect(res.status).toBe(status);
  expectErrorShape(JSON.parse(res.body), status);
}

describe('slow and idle clients', () => {
  it('headers sent a byte at a time: 408 in the error shape, connection closed', async () => {
    const client = slowClient('GET /cities HTTP/1.1\r\nHost: x\r\n', 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n');
    await expectClosedWith(client, 408);
  });

  it('a feed body sent a byte at a time: 408, connection closed', async () => {
    const client = slowClient(
      `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{"title": "`,
      'a',
    );
    await expectClosedWith(client, 408);
  });

  it('a feed body declared over 64 KiB, sent slowly: 413 at once, before it is read, connection closed', async () => {
    const client = slowClient(
      `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n{"title": "`,
      'a',
    );
    await expectClosedWith(client, 413);
  });

  it('an idle keep-alive connection is closed', async () => {
    const { port } = new URL(svc.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.resume();
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    // Node's own default is 5 s: closed before that, the configured 1 s is what applies.
    const outcome = await within(4_000, closed);
    socket.destroy();
    expect(outcome).not.toBe('still open');
  });

  it('200 slowloris connections are all closed by the server, and other clients are answered meanwhile', async () => {
    const clients = Array.from({ length: 200 }, (_, i) =>
      i % 2 === 0
        ? slowClient('GET /cities HTTP/1.1\r\nHost: x\r\n', 'X-Slow: aaaaaaaa\r\n')
        : slowClient(`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{`, ' '),
    );
    for (let i = 0; i < 20; i += 1) {
      const res = await fetch(`${svc.url}/health`, { signal: AbortSignal.timeout(5_000) });
      expect(res.status).toBe(200);
    }
    const outcomes = await within(15_000, Promise.all(clients.map((c) => c.closed)));
    for (const c of clients) c.socket.destroy();
    expect(outcomes).not.toBe('still open');
  });
});
