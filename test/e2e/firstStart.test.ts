// A first start on AWS before any boundary version is published (bootstrap seeds one; until it
// runs, the load balancer already sends traffic): every route that needs the boundaries answers
// 503 with Retry-After in the error shape, as an outage is answered, never a 500; once a version
// is published they answer. The same when the pointer is lost or garbled later, until an
// operator points at a version again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { createRuntime, type Runtime } from '../../src/main/runtime.js';
import { createLogger } from '../../src/shared/log.js';
import { runCli } from '../support/cli.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { API_KEY, eventually, getJson, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0800&end=2026-11-21T00:00:00%2B0800';

describe('before any boundary version is published', () => {
  let emulator: Emulator;
  let svc: TestService;
  let seeded: Runtime;
  beforeAll(async () => {
    emulator = await startEmulator();
    const config = await testConfig('aws', emulator);
    // Bootstrapped, then its pointer taken away: the store as a new deployment has it.
    seeded = await testRuntime(config, emulator);
    await seeded.store.delete(['cities/current.json']);
    // An API task may not write cities/ (its role; bootstrap or the scheduler publishes).
    const store = new Proxy(seeded.store, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (prop !== 'put' && prop !== 'putIfAbsent') return value.bind(target);
        return async (key: string, ...rest: unknown[]) => {
          if (key.startsWith('cities/')) throw Object.assign(new Error('Access Denied'), { name: 'AccessDenied' });
          return (value as (...a: unknown[]) => unknown).call(target, key, ...rest);
        };
      },
    });
    svc = await startTestService(await createRuntime(config, { log: createLogger('silent'), s3: emulator.s3, sqs: emulator.sqs, store }), { worker: false, reconcile: false });
  });
  afterAll(async () => {
    await svc?.stop();
    await seeded?.close();
    await emulator?.stop();
  });

  it('answers 503 with Retry-After where the boundaries are needed, never a 500', async () => {
    const paths = [
      '/cities',
      '/cities/levels',
      '/cities/outlines',
      `/reports/archive?${WINDOW}&admin=PH-QC`,
      `/reports/archive/stats?${WINDOW}&interval=day&admin=PH-QC`,
      '/reports/stream?admin=PH-QC',
      '/reports/cap.atom?admin=PH-QC',
      '/ogc/collections/local-areas/items?limit=1',
    ];
    for (const p of paths) {
      const res = await getJson(`${svc.url}${p}`);
      expect([p, res.status]).toEqual([p, 503]);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    }
    // What does not need them answers.
    for (const p of [`/reports/archive?${WINDOW}`, '/ogc/collections/reports/items?limit=1']) expect([p, (await getJson(`${svc.url}${p}`)).status]).toEqual([p, 200]);
    const post = await postReport(svc.url, report(1), { key: API_KEY });
    expect([post.status, post.headers.get('retry-after')]).toEqual([503, expect.stringMatching(/^\d+$/)]);

    // Published (as bootstrap does): the same requests answer.
    await seeded.boundaries.seedIfEmpty();
    await eventually(async () => ((await getJson(`${svc.url}/cities`)).status === 200 ? true : undefined), 15_000, '/cities once published');
    expect((await getJson(`${svc.url}/reports/archive?${WINDOW}&admin=PH-QC`)).status).toBe(200);
  });
});

describe('a boundary pointer lost or unreadable while versions are stored', () => {
  let svc: TestService | undefined;
  afterAll(async () => {
    await svc?.stop();
  });

  it('serves no version (503, never the default nor a 500) until cities rollback points at one; cities list still lists them', async () => {
    const config = await testConfig('embedded');
    const env = { DATA_DIR: config.dataDir, API_KEYS: API_KEY };
    const seed = await testRuntime(config);
    await seed.boundaries.seedIfEmpty();
    const defaults = (await seed.boundaries.current()).version;
    const set = await defaultBoundaries();
    set.label = 'published by the operators';
    const { version: published } = await seed.boundaries.publish(set);
    await seed.close();

    for (const damage of [(rt: Runtime) => rt.store.put('cities/current.json', '{"version":"06baf0a1b4'), (rt: Runtime) => rt.store.delete(['cities/current.json'])]) {
      const rt = await testRuntime(config);
      await damage(rt);
      svc = await startTestService(rt);
      for (const p of ['/cities', '/cities/levels', `/reports/archive?${WINDOW}&admin=PH-QC`]) {
        const res = await getJson(`${svc.url}${p}`);
        expect([p, res.status, res.body]).toEqual([p, 503, expect.objectContaining({ statusCode: 503, error: 'Service Unavailable' })]);
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      }
      const listed = await runCli(['cities', 'list', '--json'], env);
      expect(listed.code, listed.stderr.slice(-400)).toBe(0);
      expect((JSON.parse(listed.stdout) as { version: string; current: boolean }[]).map((v) => [v.version, v.current]).sort()).toEqual([[defaults, false], [published, false]].sort());
      const rolled = await runCli(['cities', 'rollback', '--to', published], env);
      expect(rolled.code, rolled.stderr.slice(-400)).toBe(0);
      await eventually(async () => ((await getJson(`${svc!.url}/cities/levels`)).body as { result?: { version?: string } }).result?.version === published || undefined, 15_000, 'the version rolled back to');
      await svc.stop();
      svc = undefined;
    }
  });
});
