// An HTTP proxy in front of an S3 endpoint that shapes what passes: each request's headers as
// `shape` leaves them, and its answer dropped (the connection reset once the store has answered),
// cut off half-way through its body, or refused before it reaches the store, where it says.
import http from 'node:http';
import { S3Client } from '@aws-sdk/client-s3';

export interface Shaped {
  headers: http.IncomingHttpHeaders;
  /** The store's answer read, none sent: the connection is reset. */
  dropAnswer?: boolean;
  /** The answer's headers and half its body sent, then the connection reset. */
  cutBody?: boolean;
  /** Answered with this status and S3's error body, the store never asked. */
  refuse?: number;
}

export async function storeProxy(target: () => string, shape: (req: http.IncomingMessage) => Shaped): Promise<{ client: S3Client; close: () => Promise<void> }> {
  const proxy = http.createServer((req, res) => {
    const { headers, dropAnswer, cutBody, refuse } = shape(req);
    if (refuse !== undefined) {
      req.resume();
      res.writeHead(refuse, { 'Content-Type': 'application/xml' });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>');
      return;
    }
    const upstream = http.request(new URL(req.url ?? '/', target()), { method: req.method, headers }, (answer) => {
      if (dropAnswer) {
        answer.resume();
        answer.on('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (!cutBody) {
        answer.pipe(res);
        return;
      }
      const half = Math.ceil(Number(answer.headers['content-length']) / 2);
      let sent = 0;
      answer.on('data', (chunk: Buffer) => {
        if (sent >= half) return;
        res.write(chunk.subarray(0, half - sent));
        sent += chunk.length;
        if (sent >= half) res.socket?.destroy();
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const client = new S3Client({ endpoint: `http://127.0.0.1:${(proxy.address() as { port: number }).port}`, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 3, forcePathStyle: true });
  return {
    client,
    close: async () => {
      client.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}
