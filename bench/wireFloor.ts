// The wire floor: a process with the service's HTTP stack (express, a file streamed with
// pipeline) that sends the first N bytes of a file over loopback. An answer of N bytes can
// go no faster than this; the benchmark reports each figure as a multiple of it.
// node dist/bench/wireFloor.js FILE   (prints "listening on URL"; GET /bytes/N)
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import express from 'express';

const file = process.argv[2]!;
const app = express();
app.get('/bytes/:n', async (req, res) => {
  const n = Number(req.params.n);
  res.status(200).type('application/octet-stream').set('Content-Length', String(n));
  await pipeline(createReadStream(file, { start: 0, end: n - 1 }), res).catch(() => undefined);
});
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address && typeof address === 'object') process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});
