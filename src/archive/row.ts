// One archived report: the Parquet columns of DESIGN.md "Data layout".

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
}

/** The columns of every part, hourly or compacted, in order (DESIGN.md "Data layout"). */
export const ARCHIVE_COLUMNS = [
  'pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code',
  'local_area_id', 'title', 'text', 'lng', 'lat', 'post_id', 'partner_city', 'received_at', 'boundary_version',
] as const;

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
  boundary_version VARCHAR NOT NULL
)`;
