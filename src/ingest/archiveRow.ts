// An accepted report as the row the archive keeps: the worker's for each queued report, a bulk
// import's for each it accepts. The tags are the tagger's at the time of writing.
import { sqlString } from '../archive/duckdb.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import { COLUMNS, sqlTypeOf } from '../archive/schema.js';
import type { Tags } from '../boundaries/tagger.js';
import type { ArchivedRecord, IngestRecord } from '../ledger/ledger.js';
import { parsePkey } from '../store/layout.js';

/** `record.report` as validated (parsePartnerReport); `version` the boundary version of `tags`. */
export function archiveRowOf(record: IngestRecord, tags: Tags, version: string): ArchiveRow {
  const { report } = record;
  return {
    pkey: record.pkey,
    created_at_ms: Date.parse(report.created_at),
    source: record.source,
    status: 'confirmed',
    url: null,
    image_url: report.image_url,
    disaster_type: report.disaster_type,
    report_data: null,
    instance_region_code: tags.instance_region_code,
    local_area_id: tags.local_area_id,
    title: report.title ?? '',
    text: report.text ?? '',
    lng: report.location.lng,
    lat: report.location.lat,
    post_id: report.post_id,
    partner_city: report.partner_city,
    received_at_ms: Date.parse(record.received_at),
    boundary_version: version,
    key_name: record.partner ?? null,
    province_code: tags.province_code,
    region_code: tags.region_code,
  };
}

/**
 * archiveRowOf's inverse, as far as a row keeps its record: a report only the archive holds, given
 * back to the ledger (LedgerRepair). An empty title or text is null, as a report without one is
 * archived; a row from before the key_name column names its partner in its pkey.
 */
export function archivedRecordOf(row: ArchiveRow): ArchivedRecord {
  const partner = row.key_name ?? parsePkey(row.pkey)?.partner;
  return {
    record: {
      v: 1,
      pkey: row.pkey,
      source: row.source,
      post_id: row.post_id,
      received_at: new Date(row.received_at_ms).toISOString(),
      ...(partner !== undefined && { partner }),
      report: {
        post_id: row.post_id,
        created_at: new Date(row.created_at_ms).toISOString(),
        title: row.title === '' ? null : row.title,
        text: row.text === '' ? null : row.text,
        image_url: row.image_url,
        partner_city: row.partner_city,
        disaster_type: row.disaster_type as IngestRecord['report']['disaster_type'],
        location: { lng: row.lng, lat: row.lat },
      },
    },
    retracted: row.status === 'retracted',
  };
}

/** `row` tagged anew: `tags` of its point in boundary version `version`. */
export function retaggedRow(row: ArchiveRow, tags: Tags, version: string): ArchiveRow {
  const { instance_region_code, local_area_id, province_code, region_code } = tags;
  return { ...row, instance_region_code, local_area_id, province_code, region_code, boundary_version: version };
}

/**
 * The fields of an IngestRecord's JSON that its archive row reads, as DuckDB's `from_json`
 * structure (other fields are ignored; an absent one is null).
 */
const RECORD_STRUCTURE = JSON.stringify({
  pkey: 'VARCHAR',
  source: 'VARCHAR',
  partner: 'VARCHAR',
  report: {
    created_at: 'VARCHAR',
    title: 'VARCHAR',
    text: 'VARCHAR',
    image_url: 'VARCHAR',
    disaster_type: 'VARCHAR',
    partner_city: 'VARCHAR',
    post_id: 'BIGINT',
    location: { lng: 'DOUBLE', lat: 'DOUBLE' },
  },
});

/** What archiveRowSql reads. */
export interface RowSqlInputs {
  /**
   * A relation with each record's JSON text (an IngestRecord's, with or without received_at) in a
   * column `record`, and its Tags in columns of their names (instance_region_code, …).
   */
  from: string;
  receivedAtMs: number;
  version: string;
}

/**
 * archiveRowOf as a query, for records DuckDB reads as JSON text (a bulk import's staging): every
 * column of the archive table in its order and type, the same values as archiveRowOf's row
 * written by writeParquet (test/unit/archiveRowSql.test.ts). The record's strings are
 * well-formed (parsePartnerReport): DuckDB refuses a lone surrogate's escape.
 */
export function archiveRowSql({ from, receivedAtMs, version }: RowSqlInputs): string {
  const r = '__record';
  const value: Record<(typeof COLUMNS)[number]['name'], string> = {
    pkey: `${r}.pkey`,
    created_at: `${r}.report.created_at`,
    source: `${r}.source`,
    status: `'confirmed'`,
    url: 'NULL',
    image_url: `${r}.report.image_url`,
    disaster_type: `${r}.report.disaster_type`,
    report_data: 'NULL',
    instance_region_code: 'instance_region_code',
    local_area_id: 'local_area_id',
    title: `coalesce(${r}.report.title, '')`,
    text: `coalesce(${r}.report.text, '')`,
    lng: `${r}.report.location.lng`,
    lat: `${r}.report.location.lat`,
    post_id: `${r}.report.post_id`,
    partner_city: `${r}.report.partner_city`,
    received_at: `make_timestamptz(${Math.trunc(receivedAtMs)}::BIGINT * 1000)`,
    boundary_version: sqlString(version),
    key_name: `${r}.partner`,
    province_code: 'province_code',
    region_code: 'region_code',
  };
  const list = COLUMNS.map((c) => `CAST(${value[c.name]} AS ${sqlTypeOf(c)}) AS ${c.name}`).join(', ');
  // Each record parsed once for all its columns.
  return `SELECT ${list} FROM (SELECT *, from_json(record, ${sqlString(RECORD_STRUCTURE)}) AS ${r} FROM ${from})`;
}
