// One archived report and the columns of its parts (docs/architecture.md, "The store's layout"),
// as derived from the one table of columns (schema.ts).
import { firstColumns, laterColumns, partColumns, tableDdl } from './schema.js';

export type { ArchiveRow } from './schema.js';

/** The columns every part holds, hourly or compacted, whatever release wrote it, in order. */
export const ARCHIVE_COLUMNS: readonly string[] = firstColumns();

/**
 * Columns added later, at the end: parts written before them lack them. Answers never read
 * them, and DuckDB reads only the columns a query uses, so a window mixing older and newer
 * parts answers as one; the rewriters of parts read them by name (`dedupedPartsSql`).
 */
export const LATER_COLUMNS: readonly string[] = laterColumns().map((c) => c.name);

/** The columns parts are written with now, in order. */
export const PART_COLUMNS: readonly string[] = partColumns();

export const ARCHIVE_TABLE_DDL = tableDdl();
