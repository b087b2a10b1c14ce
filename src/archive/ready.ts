// Ready texts: when a part is written (by the worker, compaction, reprocessing or a purge), its reports
// are also serialised once, as GeoJSON Features and TopoJSON geometries joined per hour, into a
// sidecar object beside it under `ready/v1/` (same path, same name, outside the Parquet layout
// that Athena and pyarrow read). A cold whole-hour read is then a plain read of ready text
// instead of DuckDB building JSON row by row. The sidecar is written before its part and
// deleted after it; a part without one (written before sidecars existed) is rendered as before.
import fs from 'node:fs/promises';
import { BIGINT, LIST, VARCHAR, listValue } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../duckdb.js';
import { REPORTS_PREFIX } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import type { WindowContext } from './context.js';
import { HOUR_MS } from './plan.js';
import type { RenderedHour } from './renderCache.js';
import { ITEM_SQL } from './sql.js';

const READY_PREFIX = 'ready/v1/';

/** The shapes kept ready, each hour's items joined by ','. */
export const READY_SHAPES = ['geojson', 'topojson'] as const;
export type ReadyShape = (typeof READY_SHAPES)[number];

/** Where a part's ready texts live. */
export function readyKeyOf(partKey: string): string {
  if (!partKey.startsWith(REPORTS_PREFIX)) throw new Error(`not a part key: ${partKey}`);
  return READY_PREFIX + partKey.slice(REPORTS_PREFIX.length);
}

/** The sidecar of a listed part, as an object of its own (same ETag: it is derived from that part). */
export function readyInfoOf(part: ObjectInfo): ObjectInfo {
  return { ...part, key: readyKeyOf(part.key) };
}

/**
 * Writes the ready texts of one part file: a row per hour, newest first, with the hour's
 * bbox, its oldest and newest created_at, and its items in every ready shape in answer order.
 * Purged retractions (tombstones in the part) are left out, as answers leave them out.
 * zstd-compressed Parquet: a few tens of bytes per report, read back by DuckDB at disk speed.
 */
export async function writeReadyTexts(db: DuckDb, partFile: string, out: string): Promise<void> {
  const shapes = READY_SHAPES.map((s) => `string_agg(${ITEM_SQL[s]}, ',' ORDER BY created_at DESC, pkey DESC) AS ${s}`);
  await db.withConnection((conn) =>
    conn.run(
      `COPY (SELECT epoch_ms(created_at) // ${HOUR_MS} * ${HOUR_MS} AS hour_ms,
          min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
          min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms, ${shapes.join(', ')}
        FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted' GROUP BY 1 ORDER BY 1 DESC)
       TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 24)`,
    ),
  );
}

/** Stores a part written to `file` under `key`, its ready texts first. */
export async function publishPart(deps: { store: ObjectStore; db: DuckDb }, key: string, file: string): Promise<Buffer> {
  const ready = `${file}.ready`;
  try {
    await writeReadyTexts(deps.db, file, ready);
    await deps.store.put(readyKeyOf(key), await fs.readFile(ready));
  } finally {
    await fs.rm(ready, { force: true });
  }
  const body = await fs.readFile(file);
  await deps.store.put(key, body);
  return body;
}

/**
 * Writes the ready texts of a part stored without them (written before they existed): a
 * compaction pass brings an older archive to cold reads at ready-text speed. True if written.
 */
export async function backfillReadyTexts(deps: { store: ObjectStore; db: DuckDb }, part: ObjectInfo, partFile: string, out: string): Promise<boolean> {
  if (await deps.store.head(readyKeyOf(part.key))) return false;
  try {
    await writeReadyTexts(deps.db, partFile, out);
    await deps.store.put(readyKeyOf(part.key), await fs.readFile(out));
  } finally {
    await fs.rm(out, { force: true });
  }
  return true;
}

/** Deletes parts, then their ready texts (a sidecar without its part is never read). */
export async function deleteParts(store: ObjectStore, keys: readonly string[]): Promise<void> {
  await store.delete(keys);
  await store.delete(keys.map(readyKeyOf));
}

/**
 * The ready hours among `hours` from the given sidecar files, as rendered hours in `shape`
 * (an hour of a sidecar without reports in it is absent from the answer).
 */
export async function readReadyHours(ctx: WindowContext, files: readonly string[], hours: readonly number[], shape: ReadyShape): Promise<Map<number, RenderedHour>> {
  const out = new Map<number, RenderedHour>();
  if (files.length === 0 || hours.length === 0) return out;
  await ctx.db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT hour_ms, encode(${shape}) AS items, min_lng, min_lat, max_lng, max_lat, min_ms, max_ms
       FROM read_parquet($files) WHERE list_contains($hours, hour_ms)`,
      { files: listValue([...files]), hours: listValue(hours.map((h) => BigInt(h))) },
      { files: LIST(VARCHAR), hours: LIST(BIGINT) },
    );
    for (const row of reader.getRowsJS() as [bigint, Uint8Array, number, number, number, number, bigint, bigint][]) {
      out.set(Number(row[0]), { text: row[1], bbox: [row[2], row[3], row[4], row[5]], minMs: Number(row[6]), maxMs: Number(row[7]) });
    }
  }, ctx.signal);
  return out;
}
