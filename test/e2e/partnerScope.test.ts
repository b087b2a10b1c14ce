// Each partner's post_ids are its own, on both backends: partner B posting A's next post_id first
// neither takes A's report nor lets B read or retract it, and a data dir or bucket written by the
// release before (test/fixtures/partner-scope-upgrade, made by that release) upgrades in place:
// its reports keep their pkeys, stay their partner's, and dedupe that partner's retries.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importFile } from '../../src/ops/importFile.js';
import { verify } from '../../src/ops/verify.js';
import { parseS3Url } from '../../src/store/s3Location.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, getJson, OTHER_KEY, postReport, report, startTestService, testConfig, testRuntime, type BackendKind, type TestService } from '../support/env.js';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/partner-scope-upgrade');
/** The keys the fixture's release was started with. */
const FIXTURE_KEYS = { alpha: 'alpha-key-0123456789abcdef', beta: 'beta-key-0123456789abcdef' };

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

async function del(url: string, postId: number, key: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': key } });
  return { status: res.status, body: await res.json() };
}

/** A report's text as GET /reports/{pkey} answers it, or the status when it is not a 200. */
async function textOf(url: string, pkey: string): Promise<string | number> {
  const res = await getJson(`${url}/reports/${pkey}`);
  return res.status === 200 ? res.body.result.properties.text : res.status;
}

describe.each(BACKENDS)("post_ids are each partner's own (%s)", (kind) => {
  let svc: TestService;
  beforeAll(async () => {
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined, { API_KEYS: `alpha:${API_KEY},beta:${OTHER_KEY}` });
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it("keeps A's report when B posted the same post_id first: two reports, each partner's retries answered with its own", async () => {
    const b = await postReport(svc.url, report(500, { text: "beta's 500" }), { key: OTHER_KEY });
    expect(b).toMatchObject({ status: 201, body: { post_id: 500, created: true, pkey: 'partner-beta-500' } });
    const a = await postReport(svc.url, report(500, { text: "alpha's 500" }), { key: API_KEY });
    expect(a).toMatchObject({ status: 201, body: { post_id: 500, created: true, pkey: 'partner-alpha-500' } });
    // Retries (even with another body) find the partner's own first version.
    expect((await postReport(svc.url, report(500, { text: 'alpha again' }), { key: API_KEY })).body).toEqual({ post_id: 500, created: false, pkey: 'partner-alpha-500', message: 'post_id 500 already exists' });
    expect((await postReport(svc.url, report(500, { text: 'beta again' }), { key: OTHER_KEY })).body).toEqual({ post_id: 500, created: false, pkey: 'partner-beta-500', message: 'post_id 500 already exists' });
    await allArchived(svc.rt);
    expect(await textOf(svc.url, 'partner-alpha-500')).toBe("alpha's 500");
    expect(await textOf(svc.url, 'partner-beta-500')).toBe("beta's 500");
    expect(await textOf(svc.url, 'partner-500')).toBe(404);
    const window = await getJson(`${svc.url}/reports/archive?start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z&geoformat=geojson`);
    expect(window.body.result.features.map((f: any) => [f.properties.pkey, f.properties.text])).toEqual([
      ['partner-beta-500', "beta's 500"],
      ['partner-alpha-500', "alpha's 500"],
    ]);
  });

  it("lets only the owner retract: the other partner's DELETE of the same post_id is its own report, or a 404", async () => {
    expect((await postReport(svc.url, report(501, { text: "alpha's 501" }), { key: API_KEY })).status).toBe(201);
    const refused = await del(svc.url, 501, OTHER_KEY);
    expect(refused).toMatchObject({ status: 404, body: { statusCode: 404, error: 'Not Found', details: [{ in: 'path', field: 'post_id', message: 'is unknown' }] } });
    expect(refused.body.message).toBe('This partner posted no report with post_id 501.');
    // B's DELETE of 500 is B's 500: A's stays.
    expect(await del(svc.url, 500, OTHER_KEY)).toMatchObject({ status: 200, body: { post_id: 500, pkey: 'partner-beta-500', retracted: true } });
    expect(await textOf(svc.url, 'partner-beta-500')).toBe(410);
    expect(await textOf(svc.url, 'partner-alpha-500')).toBe("alpha's 500");
    expect((await svc.rt.ledger.lookup('partner-alpha-500'))!.state).toBe('confirmed');
    expect(await del(svc.url, 500, API_KEY)).toMatchObject({ status: 200, body: { post_id: 500, pkey: 'partner-alpha-500', retracted: true } });
    expect((await postReport(svc.url, report(500), { key: API_KEY })).body).toMatchObject({ created: false, pkey: 'partner-alpha-500', retracted: true });
  });
});

/** Copies the fixture's state for one backend; returns the environment to start on it. */
async function fromFixture(kind: BackendKind): Promise<Record<string, string>> {
  const env = { API_KEYS: `alpha:${FIXTURE_KEYS.alpha},beta:${FIXTURE_KEYS.beta}` };
  if (kind === 'embedded') {
    const config = await testConfig('embedded');
    await fs.cp(path.join(FIXTURE, 'embedded'), config.dataDir, { recursive: true });
    return { ...env, DATA_DIR: config.dataDir };
  }
  const config = await testConfig('aws', emulator, env);
  const { bucket, prefix } = parseS3Url(config.storageUrl);
  const { bootstrap } = await import('../../src/main/bootstrap.js');
  await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
  const root = path.join(FIXTURE, 's3');
  for (const entry of await fs.readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const key = `${prefix}${path.relative(root, file).split(path.sep).join('/')}`;
    await emulator.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: await fs.readFile(file) }));
  }
  return { ...env, DATA_DIR: config.dataDir, STORAGE_URL: config.storageUrl, QUEUE_URL: config.queueUrl, AWS_ENDPOINT_URL: emulator.endpoint };
}

describe.each(BACKENDS)('upgrading the release before per-partner post_ids (%s)', (kind) => {
  let svc: TestService;
  beforeAll(async () => {
    const env = await fromFixture(kind);
    svc = await startTestService(await testRuntime(await testConfig(kind, kind === 'aws' ? emulator : undefined, env), kind === 'aws' ? emulator : undefined));
  });
  afterAll(async () => {
    await svc?.stop();
  });
  const post = (who: 'alpha' | 'beta', postId: number, text: string) => postReport(svc.url, report(postId, { text }), { key: FIXTURE_KEYS[who] });

  it('keeps the older reports under their pkeys, as their partners posted them', async () => {
    expect(await textOf(svc.url, 'partner-500')).toBe("alpha's 500");
    expect(await textOf(svc.url, 'partner-501')).toBe("beta's 501");
    expect(await textOf(svc.url, 'partner-700')).toBe('imported 700');
    expect(await textOf(svc.url, 'partner-502')).toBe(410);
  });

  it("dedupes their partners' retries, and another partner's same post_id is a report of its own", async () => {
    expect((await post('alpha', 500, 'retry')).body).toEqual({ post_id: 500, created: false, pkey: 'partner-500', message: 'post_id 500 already exists' });
    expect((await post('beta', 501, 'retry')).body).toMatchObject({ created: false, pkey: 'partner-501' });
    expect((await post('alpha', 502, 'retry')).body).toMatchObject({ created: false, pkey: 'partner-502', retracted: true });
    expect((await post('beta', 500, "beta's 500")).body).toMatchObject({ created: true, pkey: 'partner-beta-500' });
    expect((await post('alpha', 501, "alpha's 501")).body).toMatchObject({ created: true, pkey: 'partner-alpha-501' });
    // The operators' import belongs to no partner.
    expect((await post('alpha', 700, "alpha's 700")).body).toMatchObject({ created: true, pkey: 'partner-alpha-700' });
    expect((await post('beta', 500, 'retry')).body).toMatchObject({ created: false, pkey: 'partner-beta-500' });
    await allArchived(svc.rt);
    expect(await textOf(svc.url, 'partner-beta-500')).toBe("beta's 500");
    expect(await textOf(svc.url, 'partner-500')).toBe("alpha's 500");
    expect(await textOf(svc.url, 'partner-alpha-501')).toBe("alpha's 501");
    expect(await textOf(svc.url, 'partner-501')).toBe("beta's 501");
  });

  it('lets each partner retract its own, older reports included, and no other', async () => {
    expect(await del(svc.url, 502, FIXTURE_KEYS.beta)).toMatchObject({ status: 404 });
    expect(await del(svc.url, 500, FIXTURE_KEYS.beta)).toMatchObject({ status: 200, body: { pkey: 'partner-beta-500' } });
    expect(await textOf(svc.url, 'partner-500')).toBe("alpha's 500");
    expect(await del(svc.url, 500, FIXTURE_KEYS.alpha)).toMatchObject({ status: 200, body: { pkey: 'partner-500' } });
    expect(await textOf(svc.url, 'partner-500')).toBe(410);
    expect(await del(svc.url, 700, FIXTURE_KEYS.alpha)).toMatchObject({ status: 200, body: { pkey: 'partner-alpha-700' } });
    expect(await textOf(svc.url, 'partner-700')).toBe('imported 700');
  });

  it('imports without a partner as the operators did, refusing a post_id whose key is a partner report; verify finds nothing lost', async () => {
    const file = path.join(svc.rt.config.dataDir, 'again.ndjson');
    await fs.writeFile(file, [report(700), report(501), report(900, { text: 'imported 900' })].map((r) => JSON.stringify(r)).join('\n'));
    const result = await importFile(svc.rt, { file });
    expect(result).toMatchObject({ records: 3, accepted: 1, duplicate: 1, rejected: 1 });
    expect(await fs.readFile(result.rejectsFile, 'utf8')).toMatch(/partner-501 is a partner's report.*--partner/);
    const asBeta = await importFile(svc.rt, { file, partner: 'beta', restart: true });
    expect(asBeta).toMatchObject({ records: 3, accepted: 2, duplicate: 1, rejected: 0 });
    await allArchived(svc.rt);
    expect(await textOf(svc.url, 'partner-900')).toBe('imported 900');
    expect(await textOf(svc.url, 'partner-beta-900')).toBe('imported 900');
    const checked = await verify(svc.rt, { fromMs: 0, toMs: Date.now() });
    expect([checked.ok, checked.missing, checked.unexpected]).toEqual([true, [], []]);
  });
});
