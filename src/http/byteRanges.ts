// Range headers as RFC 9110 reads them where the file server (send, over range-parser) does not.
// A suffix range longer than the file (`bytes=-65536` of a 2 KB file) is the whole file, a 206
// (RFC 9110 §14.1.3); range-parser finds it unsatisfiable and the client gets a 416. Readers of
// Parquet footers ask for a fixed suffix, whatever the file's size.

/** `header` with each suffix range of `size` bytes or more spelt as the whole file (`0-`); the rest as it was. */
export function suffixesWithin(header: string, size: number): string {
  const m = /^\s*bytes\s*=(.*)$/i.exec(header);
  if (!m || size === 0) return header;
  const ranges = m[1]!.split(',').map((spec) => {
    const suffix = /^\s*-\s*(\d+)\s*$/.exec(spec);
    return suffix && Number(suffix[1]) >= size ? '0-' : spec.trim();
  });
  return `bytes=${ranges.join(',')}`;
}

/**
 * Whether an If-Range `validator` keeps the range (RFC 9110 §13.1.5): only a strong entity tag
 * equal to the file's (`etag`, strong; undefined when the file's tags are weak) or exactly its
 * Last-Modified date; anything else gets the whole file. (send, the file server, takes a weak tag
 * and an earlier date too.)
 */
export function ifRangeHolds(validator: string, file: { etag?: string; lastModifiedMs: number }): boolean {
  if (validator.startsWith('W/')) return false;
  if (validator.startsWith('"')) return validator === file.etag;
  return Date.parse(validator) === Math.floor(file.lastModifiedMs / 1000) * 1000;
}
