// The error handler's own log lines name the request's path: a partner's key pasted into it
// is redacted there as in the access log.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { errorHandler } from '../../src/http/errorHandler.js';
import { newKey } from '../../src/partners/apiKeys.js';
import { createLogger } from '../../src/shared/log.js';

describe('the error handler', () => {
  it("redact a key from the path it logs, whether the key is configured or only a key's shape, and still answer", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const configured = 'a-configured-key-that-is-long-enough';
    const generated = newKey();
    const answer = errorHandler(createLogger('debug', sink), new Set([configured]));
    // A server whose every request fails inside its handler, as a route's unexpected error would.
    const server = http.createServer((req, res) => answer(new Error('boom'), req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const path of [`/reports/${configured}.cap`, `/x/${generated}/y?key=${generated}`, '/reports/partner-alpha-1234567890123456']) {
        const res = await fetch(`${base}${path}`);
        expect(res.status).toBe(500);
        expect(await res.json()).toMatchObject({ statusCode: 500, error: 'Internal Server Error' });
      }
      const logged = lines.map((l) => JSON.parse(l) as { msg: string; path: string }).filter((l) => l.msg === 'unhandled error');
      expect(logged.map((l) => l.path)).toEqual(['/reports/[redacted].cap', '/x/[redacted]/y', '/reports/partner-alpha-1234567890123456']);
      expect(lines.join('\n')).not.toContain(configured);
      expect(lines.join('\n')).not.toContain(generated);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
