// The pages' static files (Swagger UI's bundle, the explorer's scripts and libraries): compressed
// for a client that accepts it, each encoding with its own strong ETag and a 304 on it; ranges,
// clients that accept no encoding and paths that climb out are express.static's, as before.
import { createRequire } from 'node:module';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
});
afterAll(async () => {
  await svc?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function get(target: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${svc.url}${target}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const swaggerFile = (name: string) => path.join(path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json')), name);

describe("the pages' static files", () => {
  it("Swagger UI's bundle: brotli and gzip for clients that accept them, each the file's bytes, with a strong ETag per encoding and a 304 on it", async () => {
    const file = await fs.readFile(swaggerFile('swagger-ui-bundle.js'));
    const br = await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'br, gzip' });
    expect(br.status).toBe(200);
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers['content-type']).toMatch(/javascript/);
    expect(br.headers.vary).toMatch(/Accept-Encoding/i);
    // Revalidated before each use: after an upgrade no page runs an older script kept under its name.
    expect(br.headers['cache-control']).toBe('public, no-cache');
    expect(br.body.length).toBeLessThan(file.length / 3);
    expect(zlib.brotliDecompressSync(br.body).equals(file)).toBe(true);
    expect(br.headers.etag).toMatch(/^"[^"]+-br"$/);

    const gz = await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(gz.body).equals(file)).toBe(true);
    expect(gz.headers.etag).toMatch(/^"[^"]+-gz"$/);
    expect(Number(gz.headers['content-length'])).toBe(gz.body.length);

    // Asked again: the same bytes (made once), and a 304 on the tag.
    expect((await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'br' })).body.equals(br.body)).toBe(true);
    const again = await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'br', 'If-None-Match': br.headers.etag! });
    expect(again.status).toBe(304);
    expect(again.headers['cache-control']).toBe('public, no-cache');
    expect(again.body.length).toBe(0);
    expect(again.headers['content-encoding']).toBeUndefined();
    // Another encoding's tag is another representation: the body.
    expect((await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'br', 'If-None-Match': gz.headers.etag! })).status).toBe(200);

    const head = await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'br' }, 'HEAD');
    expect([head.status, head.headers['content-length'], head.headers.etag, head.body.length]).toEqual([200, String(br.body.length), br.headers.etag, 0]);
  });

  it("the explorer's scripts and its libraries are compressed too", async () => {
    for (const target of ['/explorer/explorer.js', '/explorer/vendor/leaflet/leaflet.js', '/explorer/vendor/leaflet/leaflet.css', '/explorer/vendor/uplot/uPlot.iife.min.js']) {
      const res = await get(target, { 'Accept-Encoding': 'gzip' });
      expect([target, res.status, res.headers['content-encoding']]).toEqual([target, 200, 'gzip']);
      expect(zlib.gunzipSync(res.body).length).toBeGreaterThan(res.body.length);
    }
  });

  it('a client that accepts no encoding, and a range, get the file as it is from the file server', async () => {
    const file = await fs.readFile(swaggerFile('swagger-ui-bundle.js'));
    const plain = await get('/docs/swagger-ui-bundle.js');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.equals(file)).toBe(true);
    // Another client's answer differs: a shared cache must not give this one to a browser.
    expect(plain.headers.vary).toMatch(/Accept-Encoding/i);
    const range = await get('/docs/swagger-ui-bundle.js', { 'Accept-Encoding': 'gzip', Range: 'bytes=0-99' });
    expect(range.status).toBe(206);
    expect(range.headers['content-encoding']).toBeUndefined();
    expect(range.body.equals(file.subarray(0, 100))).toBe(true);
    // A suffix longer than the file is the whole file (RFC 9110 14.1.3), not a 416.
    const suffix = await get('/docs/swagger-ui-bundle.js', { Range: `bytes=-${file.length + 1}` });
    expect([suffix.status, suffix.headers['content-range'], suffix.body.equals(file)]).toEqual([206, `bytes 0-${file.length - 1}/${file.length}`, true]);
    // The file server's answers are revalidated too, its 304s included.
    expect(plain.headers['cache-control']).toBe('public, no-cache');
    const unchanged = await get('/docs/swagger-ui-bundle.js', { 'If-None-Match': plain.headers.etag! });
    expect([unchanged.status, unchanged.headers['cache-control']]).toEqual([304, 'public, no-cache']);
  });

  it('If-Range keeps a range only on the file\'s exact Last-Modified date: its weak tag, or another date, gets the whole file (RFC 9110 13.1.5)', async () => {
    const target = '/explorer/vendor/leaflet/leaflet.js';
    const plain = await get(target);
    const { etag, 'last-modified': lastModified } = plain.headers;
    expect(etag).toMatch(/^W\//);
    const later = new Date(Date.parse(lastModified!) + 86_400_000).toUTCString();
    const earlier = new Date(Date.parse(lastModified!) - 1000).toUTCString();
    for (const [validator, status] of [[lastModified!, 206], [etag!, 200], [etag!.slice(2), 200], [later, 200], [earlier, 200], ['not a date', 200]] as const) {
      const res = await get(target, { Range: 'bytes=0-9', 'If-Range': validator });
      expect([validator, res.status]).toEqual([validator, status]);
      expect(res.body.equals(status === 206 ? plain.body.subarray(0, 10) : plain.body)).toBe(true);
    }
  });

  it("the explorer's page file is no asset, however spelt, compressed or not (it is served at / alone, with its security policy)", async () => {
    for (const target of ['/explorer/index.html', '/explorer/index.html/', '/explorer/index.html//', '/explorer/%5Cindex.html', '/explorer/index.html%5C', '/explorer//index.html', '/explorer/vendor/..%2Findex.html']) {
      for (const encoding of ['gzip', 'br', 'identity']) {
        const res = await get(target, { 'Accept-Encoding': encoding });
        expect([target, encoding, res.status]).toEqual([target, encoding, 404]);
      }
    }
  });

  it("a precondition on the file (If-Match, If-Unmodified-Since) is judged as the file server judges it, whatever the encoding", async () => {
    for (const headers of [{ 'If-Match': '"nope"' }, { 'If-Unmodified-Since': 'Thu, 01 Jan 1970 00:00:00 GMT' }] as Record<string, string>[]) {
      for (const encoding of ['gzip', 'identity']) expect([headers, encoding, (await get('/docs/swagger-ui.css', { ...headers, 'Accept-Encoding': encoding })).status]).toEqual([headers, encoding, 412]);
    }
    // The strong tag a compressed answer gave holds as an If-Match of the same representation.
    const gz = await get('/docs/swagger-ui.css', { 'Accept-Encoding': 'gzip' });
    const matched = await get('/docs/swagger-ui.css', { 'Accept-Encoding': 'gzip', 'If-Match': gz.headers.etag! });
    expect([matched.status, matched.headers['content-encoding'], matched.body.equals(gz.body)]).toEqual([200, 'gzip', true]);
  });

  it("Swagger UI's own initializer (the Petstore's document) is never served, however spelt: ours points at /openapi.json", async () => {
    expect((await get('/docs/swagger-initializer.js')).body.toString()).toMatch(/'\/openapi\.json'/);
    for (const target of ['/docs/%73wagger-initializer.js', '/docs//swagger-initializer.js', '/docs/./swagger-initializer.js']) {
      for (const encoding of ['gzip', 'identity']) {
        const res = await get(target, { 'Accept-Encoding': encoding });
        const body = encoding === 'gzip' && res.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(res.body).toString() : res.body.toString();
        const outcome = res.status === 404 ? 'refused' : /'\/openapi\.json'/.test(body) && !/petstore/i.test(body) ? 'ours' : `${res.status}, the package's`;
        expect([target, encoding, ['refused', 'ours'].includes(outcome) ? 'refused or ours' : outcome]).toEqual([target, encoding, 'refused or ours']);
      }
    }
  });

  it('paths that climb out, dotfiles and folders are not served, however spelt', async () => {
    for (const target of ['/docs/..%2Fpackage.json', '/docs/%2e%2e/package.json', '/explorer/vendor/leaflet/..%2F..%2F..%2Fpackage.json', '/docs/.npmignore', '/explorer/vendor/leaflet/']) {
      const res = await get(target, { 'Accept-Encoding': 'gzip' });
      expect([target, res.status < 400 ? 'served' : 'refused']).toEqual([target, 'refused']);
      expect([target, res.headers['content-encoding']]).toEqual([target, undefined]);
    }
  });
});
