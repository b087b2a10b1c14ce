// The table of columns is the one place a report's schema is written: a column added to a copy of
// it reaches every derived artefact (the DDL, a real part through the appender and back, the
// Arrow schema, each text serialiser run by DuckDB, the tombstone, the event Feature and the
// OpenAPI schema), and the event Feature is byte for byte the properties the SQL writes.
import fs from 'node:fs/promises';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { Utf8 } from 'apache-arrow';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrowFields, stringColumns } from '../../src/archive/arrow.js';
import { GEOMETRY_SQL, prepareGeometry, wkbPoints } from '../../src/archive/geoparquet.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { readRows } from '../../src/archive/readRows.js';
import { answerColumns, COLUMNS, notTombstoneSql, reportPropertiesSchema, tableDdl, tombstoneProperties, tombstoneRow, tombstoneSql, type ArchiveRow, type ColumnSpec } from '../../src/archive/schema.js';
import { csvHeader, EXPORT_COLUMNS, itemSql, propertiesSql } from '../../src/archive/sql.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { featureBuilder, featureOf } from '../../src/events/feature.js';
import { ogcOpenApi30From } from '../../src/http/ogc/openapi.js';
import { scratch } from '../support/scratch.js';

const ADDED = { name: 'moderation_flag', kind: 'text', nullable: true, answer: 'property', personal: true, description: 'Why a moderator held the report.' } as const satisfies ColumnSpec;
/** The real table with a column added after `text`, before the point. */
const WIDER: ColumnSpec[] = [...COLUMNS.slice(0, COLUMNS.findIndex((c) => c.name === 'text') + 1), ADDED, ...COLUMNS.slice(COLUMNS.findIndex((c) => c.name === 'text') + 1)];

const base: ArchiveRow = {
  pkey: 'partner-k-1',
  created_at_ms: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
  source: 'partner',
  status: 'confirmed',
  url: 'https://example.org/r/1',
  image_url: null,
  disaster_type: 'flood',
  report_data: '{"depth_cm":40,"note":"ä \\"q\\""}',
  instance_region_code: 'PH-QC',
  local_area_id: null,
  province_code: null,
  region_code: 'PH-1300000000',
  title: '=SUM(A1) "quoted", comma',
  text: 'Knee deep\nnear the market 🌊',
  lng: 121.0,
  lat: 14.650000000000002,
  post_id: 1,
  partner_city: 'Quezon City',
  received_at_ms: Date.UTC(2026, 0, 2, 3, 4, 6),
  boundary_version: 'v1',
  key_name: 'k',
};
const rows: (ArchiveRow & { moderation_flag: string | null })[] = [
  { ...base, moderation_flag: '@held for review' },
  { ...base, pkey: 'partner-k-2', post_id: 2, created_at_ms: base.created_at_ms + 1000, moderation_flag: null, report_data: null, url: null, lng: -0.5, lat: 0 },
];

const work = scratch('schema-');
let part: string;
const all = async <T>(sql: string): Promise<T[]> => work.db.withConnection(async (conn) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as T[]);

beforeAll(async () => {
  part = path.join(work.dir, 'part.parquet');
  await writeParquet(work.db, rows, part, WIDER);
});

describe('a column added to a copy of the table', () => {
  it('is in the DDL, and a part written through the appender reads back with it', async () => {
    expect(tableDdl(WIDER)).toContain('  moderation_flag VARCHAR,\n');
    expect(tableDdl()).not.toContain('moderation_flag');
    const described = await all<{ column_name: string; column_type: string }>(`DESCRIBE SELECT * FROM read_parquet(${sqlString(part)})`);
    expect(described.map((c) => c.column_name)).toEqual(WIDER.map((c) => c.name));
    const back = await readRows(work.db, [part], WIDER);
    expect(back).toEqual(rows.map((r) => ({ ...r, lng: Object.is(r.lng, -0) ? 0 : r.lng })));
  });

  it('is a string field of the Arrow schema, in order', () => {
    const fields = arrowFields(WIDER);
    expect(fields.map((f) => f.name)).toEqual([...answerColumns(WIDER).map((c) => c.name), 'geometry']);
    expect(fields.find((f) => f.name === 'moderation_flag')?.type).toBeInstanceOf(Utf8);
    expect(stringColumns(WIDER)).toContain('moderation_flag');
    expect(arrowFields().map((f) => f.name)).toEqual([...EXPORT_COLUMNS, 'geometry']);
  });

  it('is in every text shape DuckDB writes: GeoJSON and NDJSON, TopoJSON, CSV (guarded against formulas)', async () => {
    const items = itemSql(WIDER);
    const out = await all<{ geojson: string; topojson: string; csv: string }>(
      `SELECT ${items.geojson} AS geojson, ${items.topojson} AS topojson, ${items.csv} AS csv FROM read_parquet(${sqlString(part)}) ORDER BY pkey`,
    );
    const flags = rows.map((r) => r.moderation_flag);
    expect(out.map((o) => (JSON.parse(o.geojson) as { properties: Record<string, unknown> }).properties.moderation_flag)).toEqual(flags);
    expect(out.map((o) => (JSON.parse(o.topojson) as { properties: Record<string, unknown> }).properties.moderation_flag)).toEqual(flags);
    const header = csvHeader(WIDER).split(',');
    expect(header).toEqual(answerColumns(WIDER).map((c) => c.name));
    expect(out[0]!.csv).toContain(`,"'@held for review",`);
    // Read back by a CSV reader: the added column is a column of its own, an empty cell for null.
    const file = path.join(work.dir, 'answer.csv');
    await fs.writeFile(file, `${csvHeader(WIDER)}\n${out.map((o) => o.csv).join('\n')}\n`);
    const read = await all<Record<string, unknown>>(`SELECT * FROM read_csv(${sqlString(file)}, header = true, quote = '"', escape = '"', all_varchar = true) ORDER BY pkey`);
    expect(read.map((r) => r.moderation_flag)).toEqual(["'@held for review", null]);
    expect(read.map((r) => r.text)).toEqual(rows.map((r) => r.text));
    expect(csvHeader()).toBe('pkey,created_at,source,status,url,image_url,disaster_type,report_data,instance_region_code,local_area_id,province_code,region_code,title,text,lng,lat');
  });

  it('is in the bulk formats\' columns', () => {
    expect(answerColumns(WIDER).map((c) => c.name)).toEqual([...EXPORT_COLUMNS.slice(0, 14), 'moderation_flag', 'lng', 'lat']);
  });

  it('is cleared in tombstones, and the purge sees a row not yet cleared', async () => {
    const [row] = await all<Record<string, unknown>>(`SELECT ${tombstoneSql(`pkey = 'partner-k-1'`, WIDER)} FROM read_parquet(${sqlString(part)}) WHERE pkey = 'partner-k-1'`);
    expect(row).toMatchObject({ status: 'retracted', title: '', text: '', url: null, image_url: null, moderation_flag: null, instance_region_code: 'PH-QC' });
    const stillThere = await all<{ n: number }>(
      `SELECT count(*)::INTEGER AS n FROM (SELECT ${tombstoneSql('true')} FROM read_parquet(${sqlString(part)})) WHERE ${notTombstoneSql(WIDER)}`,
    );
    // The real table's tombstone leaves the added column as it was: the wider table's check sees it.
    expect(stillThere[0]!.n).toBe(1);
    expect(tombstoneRow(rows[0]!, WIDER)).toMatchObject({ status: 'retracted', title: '', text: '', url: null, image_url: null, moderation_flag: null, lng: 121 });
    // A retraction's event: the tombstone's properties, in the Feature's order.
    const retracted = tombstoneProperties({ pkey: 'partner-k-1', source: 'partner' }, WIDER) as Record<string, unknown>;
    expect(retracted).toMatchObject({ pkey: 'partner-k-1', status: 'retracted', title: '', url: null, moderation_flag: null, tags: { instance_region_code: null, local_area_id: null } });
    expect(Object.keys(retracted)).toEqual(Object.keys(featureBuilder(WIDER)(rows[0]!).properties));
  });

  it('is a property of the event Feature', () => {
    expect(featureBuilder(WIDER)(rows[0]!).properties.moderation_flag).toBe('@held for review');
  });

  it('is in the OpenAPI schema of the properties, and its OGC (OpenAPI 3.0) form', () => {
    const schema = reportPropertiesSchema(WIDER) as { required: string[]; properties: Record<string, unknown> };
    expect(schema.required).toContain('moderation_flag');
    expect(schema.properties.moderation_flag).toEqual({ type: ['string', 'null'], description: ADDED.description });
    const ogc = ogcOpenApi30From({ info: {}, components: { schemas: { ReportProperties: schema } }, paths: {} }) as { components: { schemas: { ReportProperties: typeof schema } } };
    expect(ogc.components.schemas.ReportProperties.properties.moderation_flag).toMatchObject({ type: 'string', nullable: true });
  });
});

describe('the one Feature builder', () => {
  it('gives byte for byte the properties the SQL writes, for the real table and a wider one', async () => {
    for (const [table, file] of [
      [WIDER, part],
      [COLUMNS, part],
    ] as const) {
      const out = await all<{ p: string; f: string }>(`SELECT to_json(${propertiesSql(table)})::VARCHAR AS p, ${itemSql(table).geojson} AS f FROM read_parquet(${sqlString(file)}) ORDER BY pkey`);
      const build = featureBuilder(table);
      expect(out.map((o) => o.p)).toEqual(rows.map((r) => JSON.stringify(build(r).properties)));
      expect(out.map((o) => JSON.parse(o.f) as unknown)).toEqual(rows.map((r) => JSON.parse(JSON.stringify(build(r))) as unknown));
    }
    expect(featureOf(base)).toEqual(featureBuilder()(base));
  });

  it('writes what the published schema allows', async () => {
    const ajv = new Ajv2020.default({ strict: false });
    addFormats.default(ajv);
    const validate = ajv.compile(reportPropertiesSchema());
    const out = await all<{ f: string }>(`SELECT ${itemSql().geojson} AS f FROM read_parquet(${sqlString(part)})`);
    for (const o of out) expect(validate((JSON.parse(o.f) as { properties: unknown }).properties), JSON.stringify(validate.errors)).toBe(true);
    for (const r of rows) expect(validate(featureOf(r).properties)).toBe(true);
  });
});

describe('the WKB of a point', () => {
  it('is the same bytes from the SQL macros and from the Arrow writer', async () => {
    const points = [
      [121.0, 14.650000000000002],
      [-0, 0],
      [0, -0],
      [-180, -90],
      [179.99999999999997, 89.99999999999999],
      [5e-324, -1.7976931348623157e308],
    ];
    const rowsSql = points.map(([x, y]) => `(${x!.toExponential(17)}::DOUBLE, ${y!.toExponential(17)}::DOUBLE, ${points.findIndex((p) => p[0] === x && Object.is(p[1], y))})`);
    const sql = await work.db.withConnection(async (conn) => {
      await prepareGeometry(conn);
      const reader = await conn.runAndReadAll(`SELECT ${GEOMETRY_SQL} FROM (VALUES ${rowsSql.join(', ')}) AS t(lng, lat, i) ORDER BY i`);
      return reader.getRowsJS().map((r) => Buffer.from((r[0] as { bytes: Uint8Array }).bytes ?? (r[0] as Uint8Array)));
    });
    const js = wkbPoints(new Float64Array(points.map((p) => p[0]!)), new Float64Array(points.map((p) => p[1]!)));
    const jsEach = points.map((_, i) => Buffer.from(js.data.subarray(js.offsets[i], js.offsets[i + 1])));
    expect(jsEach.map((b) => b.toString('hex'))).toEqual(sql.map((b) => b.toString('hex')));
  });
});
