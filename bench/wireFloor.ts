// The wire floor: a process with the service's HTTP stack (express on node:http) that sends N
// bytes over loopback from memory, in writes of the size the archive's answers use, with the
// same backpressure. No disk, no rendering: an answer of N bytes can go no faster than this,
// and the benchmark reports each figure as a multiple of it.
// node dist/bench/wireFloor.js BYTES   (prints "listening on URL"; GET /bytes/N for N ≤ BYTES)
import { randomFillSync } from 'node:crypto';
import express from 'express';

const CHUNK = 512 * 1024;
// A random megabyte repeated (loopback does not compress; every page touched before listening).
const block = randomFillSync(Buffer.allocUnsafe(1 << 20));
const data = Buffer.allocUnsafe(Number(process.argv[2]));
for (let at = 0; at < data.length; at += block.length) block.copy(data, at);
const app = express();
app.get('/bytes/:n', (req, res) => {
  const n = Math.min(Number(req.params.n), data.length);
  res.status(200).type('application/octet-stream').set('Content-Length', String(n));
  let at = 0;
  const send = () => {
    while (at < n) {
      const piece = data.subarray(at, Math.min(n, at + CHUNK));
      at += piece.length;
      if (!res.write(piece)) return void res.once('drain', send);
    }
    res.end();
  };
  send();
});
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address && typeof address === 'object') process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});
