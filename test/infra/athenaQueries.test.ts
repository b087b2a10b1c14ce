// The Athena queries of docs/aws.md, run as written with DuckDB over an archive the service wrote
// (a bulk import's compacted days and a worker's hourly parts), through a view that has the Glue
// table's columns and types and reads its partition folders as the stack declares them; their
// answers must be the service's own. The documentation, the table and the parts cannot drift.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloodArchiveStack } from '../../infra/floodArchiveStack.js';
import { importFile } from '../../src/ops/importFile.js';
import { API_KEY_NAME, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const DOCS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/aws.md');
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** Glue's types as DuckDB's (Athena reads Parquet timestamps as UTC wall-clock times). */
const DUCKDB_TYPES: Record<string, string> = { string: 'VARCHAR', timestamp: 'TIMESTAMP', double: 'DOUBLE', bigint: 'BIGINT' };

/** The SQL blocks of the Athena section, as written. */
async function documentedQueries(): Promise<string[]> {
  const text = await fs.readFile(DOCS, 'utf8');
  const section = text.slice(text.indexOf('## Athena'), text.indexOf('\n## ', text.indexOf('## Athena') + 1));
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim().replace(/;$/, ''));
}

/** The Glue table the stack declares. */
function glueTable(): { columns: { Name: string; Type: string }[]; partitionKeys: string[]; parameters: Record<string, string> } {
  const stack = new FloodArchiveStack(new App(), 'Athena', { imageRepositoryName: 'flood-archive', imageTag: 'abc123', certificateArn: 'arn:aws:acm:ap-southeast-1:123456789012:certificate/abc' });
  const table = Object.values(Template.fromStack(stack).toJSON().Resources as Record<string, any>).find((r) => r.Type === 'AWS::Glue::Table')!.Properties.TableInput;
  return { columns: table.StorageDescriptor.Columns, partitionKeys: table.PartitionKeys.map((k: { Name: string }) => k.Name), parameters: table.Parameters };
}

/** Points in Quezon City (some around its city hall) and in Pampanga, times over November's first 25 days. */
function novemberLines(n: number): string[] {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  return Array.from({ length: n }, (_, i) => {
    const where = i % 3;
    const location =
      where === 0 ? { lat: 14.64 + random() * 0.02, lng: 121.04 + random() * 0.02 } : where === 1 ? { lat: 14.6 + random() * 0.12, lng: 121.0 + random() * 0.1 } : { lat: 15.0 + random() * 0.15, lng: 120.55 + random() * 0.2 };
    // A few storm hours hold most reports: the busiest hours are clear.
    const hour = i % 5 === 0 ? Date.UTC(2026, 10, 12, 6) + (i % 3) * HOUR_MS + random() * HOUR_MS : Date.UTC(2026, 10, 1) + random() * 25 * DAY_MS;
    return JSON.stringify(report(50_000 + i, { created_at: new Date(Math.floor(hour)).toISOString(), partner_city: where === 2 ? 'Pampanga' : 'Quezon City', location, title: `athena ${i}` }));
  });
}

describe('the Athena queries of docs/aws.md, with DuckDB over the Glue table as the stack declares it', () => {
  let svc: TestService;
  let duck: DuckDBInstance;
  let conn: DuckDBConnection;
  let features: { pkey: string; created_at: string; title: string; instance_region_code: string | null; local_area_id: string | null; lng: number; lat: number }[];

  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    const dir = await tempDir();
    const file = path.join(dir, 'november.ndjson');
    await fs.writeFile(file, novemberLines(1_500).join('\n'));
    await importFile(svc.rt, { file, partner: API_KEY_NAME });
    // And hourly parts as a running worker writes them.
    for (let i = 0; i < 12; i++) {
      const posted = await postReport(svc.url, report(60_000 + i, { created_at: `2026-11-21T0${i % 4}:1${i % 6}:00Z`, title: `live ${i}` }));
      expect(posted.status).toBe(201);
    }
    await svc.rt.worker.pollOnce(0);
    await svc.rt.worker.flush();

    const year = await getJson(`${svc.url}/reports/archive?start=2026-01-01T00:00:00%2B0000&end=2026-12-31T23:59:59%2B0000&geoformat=geojson`);
    expect(year.status).toBe(200);
    features = year.body.result.features.map((f: any) => ({ ...f.properties, ...f.properties.tags, lng: f.geometry.coordinates[0], lat: f.geometry.coordinates[1] }));
    expect(features).toHaveLength(1_512);

    // The Glue table as DuckDB sees it: its columns and types, its partition folders.
    const { columns, partitionKeys, parameters } = glueTable();
    const storeRoot = svc.rt.config.storageUrl.slice('file://'.length);
    const template = parameters['storage.location.template'] as unknown as { 'Fn::Join': [string, unknown[]] };
    const folders = String(template['Fn::Join'][1].at(-1)).replace(/^\/?/, '').replace(/\$\{\w+\}/g, '*');
    duck = await DuckDBInstance.create(':memory:');
    conn = await duck.connect();
    await conn.run("SET TimeZone = 'UTC'");
    await conn.run('CREATE SCHEMA flood_archive');
    const select = columns.map((c) => `${c.Name}::${DUCKDB_TYPES[c.Type]} AS ${c.Name}`);
    const hiveTypes = partitionKeys.map((k) => `'${k}': VARCHAR`).join(', ');
    await conn.run(
      `CREATE VIEW flood_archive.reports AS SELECT ${[...select, ...partitionKeys].join(', ')}
         FROM read_parquet('${path.join(storeRoot, folders)}/*', hive_partitioning = true, hive_types = {${hiveTypes}}, union_by_name = true)`,
    );
  }, 120_000);

  afterAll(async () => {
    conn?.closeSync();
    duck?.closeSync();
    await svc?.stop();
  });

  it('reads both layouts the service writes, each folder one the partition projection enumerates', async () => {
    const { parameters } = glueTable();
    const keys = (await keysUnder(svc.rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
    const hours = new Set(keys.map((k) => /hour=([^/]+)/.exec(k)![1]));
    expect(hours.has('all')).toBe(true);
    expect([...hours].some((h) => /^\d\d$/.test(h!))).toBe(true);
    const [yearFrom, yearTo] = parameters['projection.year.range']!.split(',').map(Number);
    for (const key of keys) {
      const [, year, month, day, hour] = /year=(\d+)\/month=(\d+)\/day=(\d+)\/hour=([^/]+)\//.exec(key)!;
      expect(Number(year)).toBeGreaterThanOrEqual(yearFrom!);
      expect(Number(year)).toBeLessThanOrEqual(yearTo!);
      expect(month).toMatch(/^(0[1-9]|1[0-2])$/);
      expect(day).toMatch(/^(0[1-9]|[12]\d|3[01])$/);
      expect(parameters['projection.hour.values']!.split(',')).toContain(hour);
    }
    const [[rows]] = (await conn.runAndReadAll('SELECT count(*)::INTEGER FROM flood_archive.reports')).getRowsJS() as [[number]];
    expect(rows).toBe(features.length);
  });

  it('a year by barangay: the service\'s counts per city and barangay', async () => {
    const [sql] = await documentedQueries();
    const got = (await conn.runAndReadAll(sql!)).getRowsJS() as [string | null, string | null, bigint][];
    const want = new Map<string, number>();
    for (const f of features) want.set(`${f.instance_region_code}|${f.local_area_id}`, (want.get(`${f.instance_region_code}|${f.local_area_id}`) ?? 0) + 1);
    expect(new Map(got.map(([city, area, n]) => [`${city}|${area}`, Number(n)]))).toEqual(want);
    expect(got.length).toBeGreaterThan(20);
    expect(got.map((r) => Number(r[2]))).toEqual([...got.map((r) => Number(r[2]))].sort((a, b) => b - a));
  });

  it('the busiest hours of the month: the ten hours with most reports, in UTC', async () => {
    const sql = (await documentedQueries())[1]!;
    const got = ((await conn.runAndReadAll(sql)).getRowsJS() as [Date, bigint][]).map(([hour, n]) => [hour.getTime(), Number(n)]);
    const perHour = new Map<number, number>();
    for (const f of features) {
      const hour = Math.floor(Date.parse(f.created_at) / HOUR_MS) * HOUR_MS;
      perHour.set(hour, (perHour.get(hour) ?? 0) + 1);
    }
    const want = [...perHour].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 10);
    expect(got).toEqual(want);
    // The storm's hours lead.
    expect(want.slice(0, 3).map(([hour]) => hour).sort()).toEqual([6, 7, 8].map((h) => Date.UTC(2026, 10, 12, h)));
  });

  it('a bounding box over a week: the reports the service answers for the same bbox and window, newest first', async () => {
    const sql = (await documentedQueries())[2]!;
    const got = ((await conn.runAndReadAll(sql)).getRowsJS() as [string, ...unknown[]][]).map((r) => r[0]);
    const box = await getJson(`${svc.url}/reports/archive?start=2026-11-15T00:00:00%2B0000&end=2026-11-21T23:59:59.999%2B0000&bbox=121.03,14.63,121.07,14.67&geoformat=geojson`);
    expect(box.status).toBe(200);
    const want = box.body.result.features.map((f: any) => f.properties.pkey);
    expect(got).toEqual(want);
    expect(got.length).toBeGreaterThan(10);
  });
});
