// An import's first pass over a batch of records: each validated as the feed validates a post
// (toPartnerInput, parsePartnerReport), the valid ones as the JSON the ledger keeps, the others
// as rejects with their reasons. The same code runs on the import's thread (GeoJSON, CSV and
// small NDJSON files) and on the validation threads (large NDJSON files, validationPool.ts).
import { isUtf8 } from 'node:buffer';
import type { Tagger } from '../boundaries/tagger.js';
import type { PlaceNames } from '../boundaries/placeNames.js';
import type { IngestRecord } from '../ledger/ledger.js';
import { InvalidReportError, parsePartnerReport } from '../partners/partnerReport.js';
import { pkeyOf, SOURCE } from '../store/layout.js';
import { fieldsNotRead, MAX_LINE_BYTES, MAX_NESTING, NESTED_TOO_DEEP, RecordError, toPartnerInput } from './importRecords.js';
import { nameGivenTwice, nestsDeeperThan } from '../shared/jsonText.js';

/** What validation needs: the current boundaries, and the partner the import runs as. */
export interface ValidationContext {
  tagger: Pick<Tagger, 'tag'>;
  placeNames: PlaceNames;
  partner: string | undefined;
}

/**
 * A batch validated, by each record's place in the batch (0-based): the valid ones' post_ids
 * and their records as JSON (an IngestRecord without received_at), the others' reasons and the
 * record as JSON, for the rejects file.
 */
export interface ValidatedBatch {
  valid: { index: number[]; postIds: number[]; json: string[] };
  rejects: { index: number; reasons: string[]; input: string }[];
  /** Names of the valid records' fields not read (fieldsNotRead), each with how many records gave it. */
  notRead: Record<string, number>;
}

export function emptyBatch(): ValidatedBatch {
  return { valid: { index: [], postIds: [], json: [] }, rejects: [], notRead: {} };
}

/** Names of fields not read kept at most: a file whose every line has names of its own cannot make the counts grow without bound. */
export const MOST_NAMES_NOT_READ = 50;

/** `n` records more that gave the field `name`, kept if fewer than MOST_NAMES_NOT_READ names are (an own property, defined: a field may be named `__proto__`). */
export function addNotRead(into: Record<string, number>, name: string, n = 1): void {
  const known = Object.hasOwn(into, name);
  if (!known && Object.keys(into).length >= MOST_NAMES_NOT_READ) return;
  Object.defineProperty(into, name, { value: (known ? into[name]! : 0) + n, enumerable: true, writable: true, configurable: true });
}

/** Validates `record`, the batch's `index`th, into `out`. */
export function validateInto(out: ValidatedBatch, index: number, record: unknown, ctx: ValidationContext): void {
  try {
    // Without a partner_city, the code of the city holding the point, which names it.
    const input = toPartnerInput(record, (lng, lat) => ctx.tagger.tag(lng, lat).instance_region_code);
    const report = parsePartnerReport(input, Date.now(), ctx.placeNames);
    const { partner } = ctx;
    // The key order is the ledger's record's: its bytes are kept as written (receivedAtTail).
    const valid: Omit<IngestRecord, 'received_at'> = { v: 1, pkey: pkeyOf(SOURCE, report.post_id, partner), source: SOURCE, post_id: report.post_id, ...(partner !== undefined && { partner }), report };
    out.valid.index.push(index);
    out.valid.postIds.push(report.post_id);
    out.valid.json.push(JSON.stringify(valid));
    for (const name of fieldsNotRead(record) ?? []) addNotRead(out.notRead, name);
  } catch (err) {
    if (!(err instanceof InvalidReportError || err instanceof RecordError)) throw err;
    const reasons = err instanceof InvalidReportError ? err.details.map((d) => `${d.field}: ${d.message}`) : [err.message];
    const input = record instanceof RecordError && record.text !== undefined ? record.text : record;
    out.rejects.push({ index, reasons, input: JSON.stringify(input) ?? 'null' });
  }
}

/** A batch of NDJSON lines end to end, line i ending at ends[i] (ndjsonBatches), validated. */
export function validateLineBatch(lines: Buffer, ends: Int32Array, ctx: ValidationContext): ValidatedBatch {
  const out = emptyBatch();
  // Checked once a batch (the common case; node:buffer's check builds no string), line by line
  // only when it fails: a line that is not UTF-8 is refused as the feed refuses such a body,
  // never stored with its bytes replaced.
  const allUtf8 = isUtf8(lines);
  for (let i = 0, start = 0; i < ends.length; start = ends[i]!, i++) {
    const bytes = lines.subarray(start, ends[i]);
    const record =
      bytes.length > MAX_LINE_BYTES
        ? new RecordError(`the line is longer than ${MAX_LINE_BYTES} bytes, more than a report can be`, bytes.toString('utf8', 0, 200))
        : allUtf8 || isUtf8(bytes)
          ? recordOfLine(bytes.toString('utf8'))
          : new RecordError('the line is not valid UTF-8: send text as UTF-8', bytes.toString('utf8'));
    validateInto(out, i, record, ctx);
  }
  return out;
}



/**
 * A line of an NDJSON file as the record it holds, or a RecordError when it is not JSON or gives
 * a name twice in one object (as the feed refuses such a body: parsers read it two ways).
 */
export function recordOfLine(line: string): unknown {
  // A byte order mark (a file saved by a Windows editor) before the first record is no part of it.
  const text = line.charCodeAt(0) === 0xfeff ? line.slice(1) : line;
  let record: unknown;
  try {
    record = JSON.parse(text);
  } catch {
    return new RecordError('the line is not valid JSON', line);
  }
  // Kept as its text, whose start says enough: written back as a value it would overflow the stack.
  if (nestsDeeperThan(text, MAX_NESTING)) return new RecordError(NESTED_TOO_DEEP, line.slice(0, 200));
  const twice = nameGivenTwice(text, record);
  return twice ? new RecordError(`${twice.field}: ${twice.message}`, line) : record;
}

/** A reject as a line of the rejects file: the record's number in the file (1-based), why, and what it was. */
export function rejectLine(n: number, reasons: readonly string[], input: string): string {
  return `{"record":${n + 1},"reasons":${JSON.stringify(reasons)},"input":${input}}\n`;
}
