// What a reader of the archive asks for: one typed object, built once by the request's parser
// and handed unchanged to the planner and to the SQL that filters the parts. A new filter is a
// new field here, a new clause in `sql.ts` (`filteredRows`), and a new term in `isUnfiltered`.

/** Position after which a page continues: the last report of the previous page. */
export interface Cursor {
  createdMs: number;
  pkey: string;
  /** Only reports received up to here: pages stay stable while reports arrive. */
  receivedBeforeMs: number;
}

export type Bbox = [number, number, number, number];

export interface RetractedReport {
  pkey: string;
  createdMs: number;
}

/** A report whose archived row or state changed; `movedFrom`: cities a re-tag moved it out of meanwhile. */
export interface ChangedReport extends RetractedReport {
  movedFrom?: readonly string[];
}

export interface WindowQuery {
  startMs: number;
  /** Inclusive. */
  endMs: number;
  /**
   * The city codes (instance_region_code) a report must carry one of: `admin=` expanded to the
   * cities of the province or region it names (boundaries/adminAreas.ts); undefined: every city.
   */
  admin: readonly string[] | undefined;
  /** [minLng, minLat, maxLng, maxLat], inclusive. */
  bbox?: Bbox | undefined;
  /** Only reports newer than this one in answer order (a page's continuation). */
  after?: Cursor | undefined;
  receivedBeforeMs?: number | undefined;
  /** Retracted reports as tombstones (status `retracted`, title and text "", URLs null) instead of left out. */
  includeRetracted?: boolean | undefined;
  /**
   * Retracted reports of the window whose parts still hold them as they were (not yet purged):
   * set by `Archive.open` from the ledger, so they leave every answer at once.
   */
  retracted?: readonly RetractedReport[] | undefined;
  /**
   * Only the reports whose archived row or state changed after this instant (late arrivals,
   * retractions as tombstones), whatever their created_at inside the window.
   */
  updatedAfterMs?: number | undefined;
  /** The reports changed in (updatedAfterMs, watermark]: set by `Archive.open`. */
  changed?: readonly ChangedReport[] | undefined;
  /**
   * Of `changed`, those a re-tag moved out of the `admin` cities: answered too (with their new
   * tags), so a mirror of the area learns they left it. Set by `Archive.open`.
   */
  movedOut?: readonly ChangedReport[] | undefined;
  /** One report by its key (GET /reports/{pkey}). */
  pkey?: string | undefined;
  /** At most this many reports (a page); undefined: the whole window. */
  limit?: number | undefined;
}

/** No filter but the window: an hour inside it is answered whole. */
export function isUnfiltered(query: WindowQuery): boolean {
  return query.admin === undefined && query.bbox === undefined && query.after === undefined && query.receivedBeforeMs === undefined && query.pkey === undefined && query.changed === undefined;
}

/**
 * The query's answer-shaping fields, canonically (part of the window's tag). The received-by
 * bound of a page is left out: for one set of parts it changes nothing a closed window holds.
 */
export function queryKey(query: WindowQuery): string {
  return JSON.stringify([query.startMs, query.endMs, query.admin ?? null, query.bbox ?? null, query.limit ?? null, query.after ? [query.after.createdMs, query.after.pkey] : null, query.pkey ?? null,
    query.includeRetracted === true, (query.retracted ?? []).map((r) => r.pkey).sort(), query.changed ? query.changed.map((r) => r.pkey).sort() : null, query.movedOut ? query.movedOut.map((r) => r.pkey).sort() : null]);
}
