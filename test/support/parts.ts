// Parts written straight by DuckDB, as the worker writes them (newest first), with texts that
// need escaping and some report_data: for tests that need many reports or older sidecars.
import { sqlString, type DuckDb } from '../../src/archive/duckdb.js';

/**
 * Reports `first` … `first + n - 1`, the first at `fromMs`, one every `stepMs`, written to `file`
 * as a part. `varied`: texts that do not compress (for answers of many bytes).
 */
export async function writePartFile(db: DuckDb, file: string, first: number, n: number, fromMs: number, stepMs: number, options: { varied?: boolean } = {}): Promise<void> {
  const plain = `CASE WHEN i % 3 = 0 THEN 'Line one' || chr(10) || 'line two\\ and a tab' || chr(9) ELSE repeat('Hanggang tuhod. ', 1 + i % 9) END`;
  const varied = [1, 2, 3, 4].map((k) => `md5((i * ${k})::VARCHAR)`).join(" || ' ' || ");
  const at = (plusUs: number) => `make_timestamptz(${fromMs * 1000}::BIGINT + (i - ${first}) * ${stepMs * 1000}::BIGINT + ${plusUs})`;
  await db.withConnection((conn) =>
    conn.run(
      `COPY (SELECT 'partner-' || i AS pkey, ${at(0)} AS created_at,
                    'partner' AS source, 'confirmed' AS status, CASE WHEN i % 7 = 0 THEN 'https://example.org/r/' || i END AS url, NULL::VARCHAR AS image_url,
                    'flood' AS disaster_type, CASE WHEN i % 5 = 0 THEN ('{"depth_cm":' || (i % 120) || ',"note":"ulan \\"malakas\\""}')::JSON END AS report_data,
                    CASE WHEN i % 2 = 0 THEN 'PH-QC' ELSE 'PH-PG' END AS instance_region_code, NULL::VARCHAR AS local_area_id,
                    CASE WHEN i % 2 = 0 THEN 'PH-1307400000' ELSE 'PH-0305400000' END AS province_code, CASE WHEN i % 2 = 0 THEN 'PH-1300000000' ELSE 'PH-0300000000' END AS region_code,
                    'Baha "' || i || '" sa kalsada, ñ' AS title, ${options.varied ? varied : plain} AS text,
                    (121.0 + (i % 1000) * 0.0001)::DOUBLE AS lng, (14.6 + (i % 777) * 0.0001)::DOUBLE AS lat, i::BIGINT AS post_id, 'Quezon City' AS partner_city,
                    ${at(60_000_000)} AS received_at, 'v0' AS boundary_version, 'alpha' AS key_name
             FROM range(${first}, ${first + n}) t(i) ORDER BY created_at DESC, pkey DESC)
       TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`,
    ),
  );
}
