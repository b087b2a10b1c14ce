// S3 as it is on the network, for benchmarks: a TCP proxy in front of an emulator that holds
// back the first byte of each answer (a request's round trip and the store's own latency) and
// paces every connection to a bandwidth, as one S3 connection carries about 100 MB/s.
import net from 'node:net';

export interface Shape {
  /** Delay before the first byte of each answer (after each request on a connection). */
  firstByteMs: number;
  /** Bytes per second per connection, each way back to the client. */
  bytesPerSecond: number;
}

export interface ShapedProxy {
  /** `target` with the proxy's port. */
  url: string;
  /** Bytes sent back to clients so far. */
  bytesDown(): number;
  /** Answers begun so far: one per request (a round trip to the store). */
  answers(): number;
  close(): Promise<void>;
}

/** Chunks a connection holds before it stops reading from upstream (bounded memory). */
const HIGH_WATER = 64;

export async function shapedProxy(target: string, shape: Shape): Promise<ShapedProxy> {
  const upstreamUrl = new URL(target);
  let down = 0;
  let answers = 0;
  const sockets = new Set<net.Socket>();
  // Without Nagle's algorithm on either side, as S3's servers and the SDK's sockets send: on
  // loopback (64 KB segments) it held an answer's last segment back until the previous one was
  // acknowledged, which a receiver delays by up to 40 ms, a stall the network would not have.
  const server = net.createServer({ noDelay: true }, (client) => {
    const upstream = net.connect({ port: Number(upstreamUrl.port), host: '127.0.0.1', noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    const queue: Buffer[] = [];
    // An upstream that closes after its answer (moto does) ends the client once the answer is out.
    let upstreamDone = false;
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      upstreamDone = true;
      if (queue.length === 0 && !pumping) client.end();
    });
    // A request written since the last answer began: the next bytes back are an answer's first.
    let asked = false;
    let notBefore = 0;
    let pumping = false;
    client.on('data', (d) => {
      asked = true;
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (asked) {
        asked = false;
        answers += 1;
        notBefore = Math.max(notBefore, performance.now() + shape.firstByteMs);
      }
      queue.push(d);
      if (queue.length >= HIGH_WATER) upstream.pause();
      void pump();
    });
    async function pump(): Promise<void> {
      if (pumping) return;
      pumping = true;
      try {
        while (queue.length > 0 && !client.destroyed) {
          const wait = notBefore - performance.now();
          // Timers fire a millisecond apart at best: short waits add up as debt and are slept together.
          if (wait > 2) await new Promise((r) => setTimeout(r, wait));
          const chunk = queue.shift()!;
          if (queue.length < HIGH_WATER / 2) upstream.resume();
          client.write(chunk);
          down += chunk.length;
          notBefore = Math.max(notBefore, performance.now()) + (chunk.length / shape.bytesPerSecond) * 1000;
        }
      } finally {
        pumping = false;
        if (upstreamDone && queue.length === 0) client.end();
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(target);
  url.port = String(port);
  return {
    url: url.toString().replace(/\/$/, ''),
    bytesDown: () => down,
    answers: () => answers,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
