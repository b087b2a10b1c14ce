// Where releases live in the store (FORMAT.md): the only place that spells their keys, and what
// a period and a release id are.

export const RELEASES_PREFIX = 'releases/';
export const CATALOG_KEY = `${RELEASES_PREFIX}catalog.json`;
export const COLLECTION_KEY = `${RELEASES_PREFIX}collection.json`;

/** A period released whole: a UTC year (`2025`) or month (`2025-06`). */
export interface Period {
  label: string;
  startMs: number;
  /** Inclusive, to the millisecond. */
  endMs: number;
  /** Its months, each a file of the release, oldest first: `2025-06`, with their windows. */
  months: { label: string; startMs: number; endMs: number }[];
}

/** The period a label names, or undefined when it names none. */
export function parsePeriod(label: string): Period | undefined {
  const m = /^(\d{4})(?:-(\d{2}))?$/.exec(label);
  if (!m) return undefined;
  const year = Number(m[1]);
  const month = m[2] === undefined ? undefined : Number(m[2]);
  if (year < 1970 || (month !== undefined && (month < 1 || month > 12))) return undefined;
  const first = month === undefined ? 0 : month - 1;
  const count = month === undefined ? 12 : 1;
  const months = Array.from({ length: count }, (_, i) => {
    const startMs = Date.UTC(year, first + i, 1);
    return { label: `${year}-${String(first + i + 1).padStart(2, '0')}`, startMs, endMs: Date.UTC(year, first + i + 1, 1) - 1 };
  });
  return { label, startMs: months[0]!.startMs, endMs: months[months.length - 1]!.endMs, months };
}

/** Why no release of `period` can be made at `nowMs` (it is not over yet), or undefined when one can. */
export function notClosed(period: Period, nowMs: number): string | undefined {
  if (period.endMs < nowMs) return undefined;
  return `--period ${period.label} is not over until ${new Date(period.endMs + 1).toISOString()}: a release is of a closed period`;
}

/** A release's id: its period and revision, `2025-r2`. */
export const releaseId = (period: string, revision: number): string => `${period}-r${revision}`;

export function parseReleaseId(id: string): { period: string; revision: number } | undefined {
  // A revision of up to six digits: a longer id names no release (and no file name holds it).
  const m = /^(\d{4}(?:-\d{2})?)-r([1-9]\d{0,5})$/.exec(id);
  return m ? { period: m[1]!, revision: Number(m[2]) } : undefined;
}

export const releaseDir = (id: string): string => `${RELEASES_PREFIX}${id}/`;
export const manifestKey = (id: string): string => `${releaseDir(id)}manifest.json`;
export const itemKey = (id: string): string => `${releaseDir(id)}item.json`;
export const citationKey = (id: string): string => `${releaseDir(id)}CITATION.cff`;

/** The files of a month in a release, by format. */
export const monthFiles = (month: string) => ({ parquet: `reports-${month}.parquet`, csv: `reports-${month}.csv.gz` });
