// Shared checks of the fault suite.
import net from 'node:net';
import { expect } from 'vitest';

/** The error shape of the HTTP contract, and no internals in it. */
export function expectErrorShape(body: any, status: number): void {
  expect(body).toMatchObject({ statusCode: status, error: expect.any(String), message: expect.any(String), details: expect.any(Array) });
  expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'statusCode']);
  expect(JSON.stringify(body)).not.toMatch(/at .*\.(ts|js):\d+/);
}

/**
 * A TCP relay in front of an S3/SQS endpoint that can go silent: while stalled it accepts
 * connections and takes bytes but never answers, on new and open connections alike, as a
 * paused or black-holed endpoint does (no refusal, no reset).
 */
export interface StallableEndpoint {
  url: string;
  stall(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function stallableEndpoint(target: string): Promise<StallableEndpoint> {
  const { port: targetPort, hostname } = new URL(target);
  let stalled = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    if (stalled) return; // accepted, and never a byte back
    const upstream = net.connect(Number(targetPort), hostname);
    sockets.add(upstream);
    upstream.on('close', () => {
      sockets.delete(upstream);
      if (!stalled) client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('data', (d) => (stalled ? undefined : upstream.write(d)));
    upstream.on('data', (d) => (stalled ? undefined : client.write(d)));
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
      // As an endpoint that comes back resets the connections it left hanging: a request sent
      // into the silence fails now rather than at its client's timeout, and is retried.
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** fetch that gives up after `ms`: a request that hangs fails the test instead of the suite. */
export async function fetchWithin(ms: number, url: string, init: RequestInit = {}): Promise<{ status: number; body: any; headers: Headers; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(ms) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers, ms: performance.now() - started };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Whether the server closed the connection (before `ms` ran out). */
  closed: boolean;
}

/**
 * Sends raw bytes on a fresh connection and reads until the server closes it or `ms` pass:
 * what a client that does not speak HTTP politely gets back (the first answer parsed, and
 * `text`, every byte received).
 */
export async function rawRequest(url: string, chunks: (string | Buffer)[], ms = 8_000): Promise<RawResponse & { text: string }> {
  const { port, hostname } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const received: Buffer[] = [];
  socket.on('data', (d: Buffer) => received.push(d));
  const closed = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  for (const chunk of chunks) if (!socket.destroyed) socket.write(chunk);
  const wasClosed = await closed;
  socket.destroy();
  const text = Buffer.concat(received).toString('latin1');
  return { ...parseRaw(text), closed: wasClosed, text };
}

export function parseRaw(text: string): Omit<RawResponse, 'closed'> {
  const end = text.indexOf('\r\n\r\n');
  const head = end < 0 ? text : text.slice(0, end);
  const [statusLine, ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0), headers, body: end < 0 ? '' : text.slice(end + 4) };
}
