// Years as written: 0070 is not 1970, 0099 not 1999. The service takes instants from
// 1970-01-01T00:00:00Z on (the feed: up to an hour ahead; archive queries: up to
// 9999-12-31T23:59:59Z) and names the field of anything outside.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedPkeys, allArchived, getJson, keysUnder, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
});
afterAll(async () => {
  await svc?.stop();
});

const archive = (query: string) => getJson(`${svc.url}/reports/archive?${query}&geoformat=geojson`);

describe('the feed', () => {
  it.each(['0099-06-15T12:00:00Z', '0070-01-01T00:00:00Z', '0000-01-01T00:00:00Z', '1969-12-31T23:59:59Z', '1970-01-01T07:59:59+08:00'])(
    'rejects created_at %s with a 400 naming it, and stores nothing',
    async (createdAt) => {
      const res = await postReport(svc.url, report(7001, { created_at: createdAt }));
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([{ in: 'body', field: 'created_at', message: 'must not be before 1970-01-01T00:00:00Z' }]);
      expect(await acceptedPkeys(svc.rt)).toEqual([]);
    },
  );

  it('takes 1970-01-01T00:00:00Z and archives it in 1970, not as another year', async () => {
    expect((await postReport(svc.url, report(7002, { created_at: '1970-01-01T08:00:00+08:00' }))).status).toBe(201);
    expect((await postReport(svc.url, report(7003, { created_at: '1999-06-15T12:00:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    const first = await archive('start=1970-01-01T00:00:00Z&end=1970-01-01T23:59:59Z');
    expect(first.body.result.features.map((f: any) => f.properties.created_at)).toEqual(['1970-01-01T00:00:00.000Z']);
    expect((await keysUnder(svc.rt, 'reports/v1/year=1970/')).length).toBe(1);
  });
});

describe('archive queries', () => {
  it.each([
    ['start in year 0099', 'start=0099-06-15T00:00:00Z&end=1999-06-15T23:59:59Z', ['start']],
    ['both in year 0099 (once read as 1999)', 'start=0099-06-15T00:00:00Z&end=0099-06-15T23:59:59Z', ['end', 'start']],
    ['start in year 0000', 'start=0000-01-01T00:00:00%2B0000&end=1970-01-01T00:00:00Z', ['start']],
    ['start a second before 1970', 'start=1969-12-31T23:59:59Z&end=1970-01-01T00:00:00Z', ['start']],
    ['end past year 9999 in UTC', 'start=9999-12-31T00:00:00Z&end=9999-12-31T23:59:59-0100', ['end']],
  ])('%s → 400 naming the field', async (_name, query, fields) => {
    const res = await archive(query);
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: any) => d.field).sort()).toEqual(fields);
    for (const d of res.body.details) expect(d.message).toBe('must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z');
  });

  it('the edges of the range are windows like any other', async () => {
    expect((await archive('start=1970-01-01T00:00:00Z&end=1970-01-01T00:00:00Z')).body.result.features).toHaveLength(1);
    expect((await archive('start=9999-12-31T00:00:00Z&end=9999-12-31T23:59:59Z')).body.result.features).toEqual([]);
    // The 1999 report is found in 1999, where it was posted.
    expect((await archive('start=1999-06-15T00:00:00Z&end=1999-06-15T23:59:59Z')).body.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(7003)]);
  });
});
