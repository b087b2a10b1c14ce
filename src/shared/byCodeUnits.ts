// One order for text in what the service writes (CLI lines, listings, messages): by UTF-16 code
// unit, the same on every host (for ASCII keys, the order SQLite and the object store list them
// in). localeCompare orders by the process's locale (LANG, LC_ALL): the same run printed another
// order on a Czech or Danish host.

/** Compares `a` and `b` by code unit: a sort's comparator. */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
