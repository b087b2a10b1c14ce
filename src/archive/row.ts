// One archived report: the Parquet columns of docs/architecture.md, "The store's layout".

export interface ArchiveRow {
  pkey: string;
  created_at_ms: number;
  source: string;
  status: string;
  url: string | null;
  image_url: string | null;
  disaster_type: string;
  /** JSON text or null. */
  report_data: string | null;
  instance_region_code: string | null;
  local_area_id: string | null;
  title: string;
  text: string;
  lng: number;
  lat: number;
  post_id: number;
  partner_city: string;
  received_at_ms: number;
  boundary_version: string;
  /** The name of the API key that accepted it; null (or absent) when none is known (older reports, operators' imports). */
  key_name?: string | null;
}

/** The columns every part holds, hourly or compacted, whatever release wrote it, in order (docs/architecture.md, "The store's layout"). */
export const ARCHIVE_COLUMNS = [
  'pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code',
  'local_area_id', 'title', 'text', 'lng', 'lat', 'post_id', 'partner_city', 'received_at', 'boundary_version',
] as const;

/**
 * Columns added later, at the end: parts written before them lack them. Answers never read
 * them, and DuckDB reads only the columns a query uses, so a window mixing older and newer
 * parts answers as one; the rewriters of parts read them by name (`dedupedPartsSql`).
 */
export const LATER_COLUMNS = ['key_name'] as const;

/** The columns parts are written with now, in order. */
export const PART_COLUMNS = [...ARCHIVE_COLUMNS, ...LATER_COLUMNS] as const;

export const ARCHIVE_TABLE_DDL = `(
  pkey VARCHAR NOT NULL,
  created_at TIMESTAMPTZ NOT NULL,
  source VARCHAR NOT NULL,
  status VARCHAR NOT NULL,
  url VARCHAR,
  image_url VARCHAR,
  disaster_type VARCHAR NOT NULL,
  report_data JSON,
  instance_region_code VARCHAR,
  local_area_id VARCHAR,
  title VARCHAR NOT NULL,
  text VARCHAR NOT NULL,
  lng DOUBLE NOT NULL,
  lat DOUBLE NOT NULL,
  post_id BIGINT NOT NULL,
  partner_city VARCHAR NOT NULL,
  received_at TIMESTAMPTZ NOT NULL,
  boundary_version VARCHAR NOT NULL,
  key_name VARCHAR
)`;
