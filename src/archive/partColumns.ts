// One archived report and the columns of its parts (docs/architecture.md, "The store's layout"),
// as derived from the one table of columns (schema.ts).
import { tableDdl } from './schema.js';

export type { ArchiveRow } from './schema.js';

/**
 * The parts' DuckDB DDL, every column written today. Parts written before a later column lack
 * it; every reader reads parts by name and takes it as null there (readRows.ts, partsSql).
 */
export const ARCHIVE_TABLE_DDL = tableDdl();
