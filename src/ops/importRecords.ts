// The records of an import file: NDJSON, GeoJSON or CSV, partner bodies or CogniCity-style
// export rows (point as GeoJSON or WKT), each mapped to a feed body for the feed's validation.
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import { pipeline } from 'node:stream';
import { CsvError, parse as parseCsv } from 'csv-parse';
import { namesGivenTwice, valueNestsDeeperThan } from '../shared/jsonText.js';

export type ImportFormat = 'ndjson' | 'geojson' | 'csv';

/**
 * A file or option that cannot be imported as asked (its format, a GeoJSON document that does
 * not parse, a CSV the parser gives up on, a rejects file that is the input): running the same
 * command again cannot help, so it is the command's mistake (exit 2), not a run to resume.
 */
export class ImportInputError extends Error {
  override name = 'ImportInputError';
}

export function detectFormat(file: string): ImportFormat {
  const ext = file.toLowerCase().slice(file.lastIndexOf('.') + 1);
  if (ext === 'ndjson' || ext === 'jsonl') return 'ndjson';
  if (ext === 'geojson' || ext === 'json') return 'geojson';
  if (ext === 'csv') return 'csv';
  throw new ImportInputError(`cannot tell the format of ${file} from its name: pass --format ndjson|geojson|csv`);
}

/** How compressed files begin, and the command that writes out their text (it works whatever the file's name). */
const COMPRESSED: readonly { magic: Buffer; what: string; undo: string }[] = [
  { magic: Buffer.from([0x1f, 0x8b]), what: 'gzip-compressed', undo: 'gzip -dc' },
  { magic: Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), what: 'zstd-compressed', undo: 'zstd -dc' },
  { magic: Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), what: 'xz-compressed', undo: 'xz -dc' },
  { magic: Buffer.from([0x50, 0x4b, 0x03, 0x04]), what: 'a zip archive', undo: 'unzip -p' },
];

/** bzip2's header: "BZh" and its block size, a digit 1–9 (a CSV's header may begin with "BZh"). */
const isBzip2 = (head: Buffer, n: number) => n >= 4 && head.subarray(0, 3).toString('latin1') === 'BZh' && head[3]! >= 0x31 && head[3]! <= 0x39;

/**
 * Refuses a compressed file before a record is read: read as text, its every line would be a
 * reject ("not valid UTF-8") and the import would finish with nothing. An import reads its file
 * by byte offsets to resume, which a compressed stream does not allow.
 */
export async function checkNotCompressed(file: string): Promise<void> {
  const head = Buffer.alloc(8);
  const handle = await fs.open(file, 'r');
  let n: number;
  try {
    n = (await handle.read(head, 0, head.length, 0)).bytesRead;
  } finally {
    await handle.close();
  }
  const found = isBzip2(head, n) ? { what: 'bzip2-compressed', undo: 'bzip2 -dc' } : COMPRESSED.find(({ magic }) => n >= magic.length && head.subarray(0, magic.length).equals(magic));
  if (found) throw new ImportInputError(`${file} is ${found.what}: write out its text (\`${found.undo} ${file} > FILE\`) and import FILE (an import reads its file by byte offsets, which a compressed stream has not)`);
}

/** Columns that give a record's point: one of them, or a latitude and a longitude. */
const POINT_COLUMNS = ['location', 'the_geom', 'geom', 'geometry', 'point'];
const LAT_COLUMNS = ['lat', 'latitude'];
const LNG_COLUMNS = ['lng', 'lon', 'long', 'longitude'];

/**
 * A CSV file's header, checked before its rows: one without post_id or a point (another
 * separator than the comma, names in capitals) would make every row a reject for the same
 * reason, and the import a success that accepted nothing.
 */
function csvColumns(file: string, header: string[]): string[] {
  const has = (names: string[]) => names.some((n) => header.includes(n));
  const lacks = [
    ...(header.includes('post_id') ? [] : ['no post_id column']),
    ...(has(POINT_COLUMNS) || (has(LAT_COLUMNS) && has(LNG_COLUMNS)) ? [] : ['no point column (location, the_geom, geom, geometry or point; or lat and lng)']),
  ];
  if (lacks.length > 0) {
    throw new ImportInputError(`${file}: its CSV header (${header.slice(0, 8).join(', ').slice(0, 200)}) has ${lacks.join(' and ')}: the first line names the columns, comma-separated, in lower case`);
  }
  // A column named twice would be read as its last one, silently (a JSON record naming a field twice is a reject).
  const twice = [...new Set(header.filter((name, i) => name !== '' && header.indexOf(name) !== i))];
  if (twice.length > 0) throw new ImportInputError(`${file}: its CSV header names ${twice.slice(0, 5).join(', ').slice(0, 200)} twice: each column once`);
  return header;
}

/**
 * The largest GeoJSON document read: it is read whole (parsed, then its names checked), about five
 * times its size in memory, and a string past 512 MiB cannot be made at all. A larger collection
 * is imported one feature a line.
 */
const GEOJSON_MAX_BYTES = 128 * 1024 * 1024;
/** The longest CSV record read: past it (an unclosed quote, most likely) the file is refused, not buffered to the end. */
const CSV_MAX_RECORD_CHARS = 16 * 1024 * 1024;

/** A GeoJSON or CSV file's records in order (NDJSON is read as bytes: ndjsonBatches). */
export async function* records(file: string, format: Exclude<ImportFormat, 'ndjson'>): AsyncIterable<unknown> {
  if (format === 'geojson') {
    const { size } = await fs.stat(file);
    if (size > GEOJSON_MAX_BYTES) {
      throw new ImportInputError(
        `${file} is a GeoJSON document of ${Math.round(size / 2 ** 20)} MiB; one over ${GEOJSON_MAX_BYTES / 2 ** 20} MiB is not read whole: write it one feature a line (ogr2ogr -f GeoJSONSeq FILE.ndjson ${file}) and import FILE.ndjson`,
      );
    }
    const text = await fs.readFile(file, 'utf8');
    // A byte order mark (a file saved by a Windows editor) is no part of the document.
    const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
    // An empty file holds no record, as an empty NDJSON file does.
    if (body.trim() === '') return;
    let doc: { type?: string; features?: unknown[] };
    try {
      doc = JSON.parse(body) as typeof doc;
    } catch (err) {
      throw new ImportInputError(`${file} is not one GeoJSON document (${(err as Error).message}): a FeatureCollection or a Feature, or pass --format ndjson for one record a line`);
    }
    // Not a document of records (an array, a FeatureCollection whose features are no list): the
    // file's mistake, not one reject saying the whole document has no point.
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc) || (doc.type === 'FeatureCollection' && !Array.isArray(doc.features))) {
      throw new ImportInputError(`${file} is no FeatureCollection with a list of features, nor one Feature or report: pass --format ndjson for one record a line`);
    }
    // A name given twice (read one way here and another by other readers, as the feed refuses
    // such a body) rejects its feature, or the file when it is outside every feature.
    const repeated = new Map<number, string>();
    const collection = doc.type === 'FeatureCollection';
    for (const { field, message } of namesGivenTwice(body, doc)) {
      const feature = collection ? /^features\[(\d+)\]\.?/.exec(field) : ([''] as const);
      if (!feature) throw new ImportInputError(`${file}: ${field} ${message}`);
      const n = collection ? Number(feature[1]) : 0;
      if (!repeated.has(n)) repeated.set(n, `${field.slice(feature[0].length) || '(body)'}: ${message}`);
    }
    const features = collection ? doc.features! : [doc];
    yield* features.map((f, i) =>
      // Kept as a note, not its text: written back it would overflow the stack.
      valueNestsDeeperThan(f, MAX_NESTING)
        ? new RecordError(NESTED_TOO_DEEP, `(feature ${i + 1}, not copied: nested more than ${MAX_NESTING} deep)`)
        : repeated.has(i)
          ? new RecordError(repeated.get(i)!, JSON.stringify(f))
          : f,
    );
    return;
  }
  // A row with more or fewer fields than the header is a reject of its own, not the end of the file.
  const parser = parseCsv({
    columns: (header: string[]) => csvColumns(file, header),
    bom: true,
    skip_empty_lines: true,
    trim: true,
    relax_column_count: true,
    info: true,
    raw: true,
    max_record_size: CSV_MAX_RECORD_CHARS,
  });
  // pipeline, not pipe: a read error fails the parser (and so this iteration) instead of being an
  // 'error' event nobody listens to, and a reader that stops early closes the file.
  pipeline(createReadStream(file), parser, () => undefined);
  const rows = (parser as AsyncIterable<{ record: Record<string, string>; info: { error?: Error }; raw: string }>)[Symbol.asyncIterator]();
  try {
    for (;;) {
      let next: IteratorResult<{ record: Record<string, string>; info: { error?: Error }; raw: string }>;
      try {
        next = await rows.next();
      } catch (err) {
        // The parser's own (a quote it cannot close, not CSV at all): it reads no further.
        if (err instanceof CsvError) {
          const hint = err.code === 'CSV_MAX_RECORD_SIZE' ? ` (over ${CSV_MAX_RECORD_CHARS / 2 ** 20} MiB: a quote never closed?)` : '';
          throw new ImportInputError(`${file} could not be read as CSV: ${err.message}${hint}`);
        }
        throw err;
      }
      if (next.done) return;
      const { record, info, raw } = next.value;
      // Its reject keeps the row as it was written (the parsed record lacks the fields beyond the header's).
      yield info.error ? new RecordError(`the row's fields do not match the header's columns (${info.error.message})`, raw.replace(/\r?\n$/, '')) : record;
    }
  } finally {
    // A reader that stops early (a sink that failed) closes the parser, and with it the file.
    await rows.return?.();
  }
}

/**
 * An NDJSON file's lines, `size` records a batch, as bytes: each batch its lines end to end
 * (`ends[i]`: where the batch's `i`th line ends, the next one starting there), decoded and parsed
 * where they are validated (on a thread of its own for a large file). Lines as Node's readline
 * splits them (at LF, CRLF or a lone CR; blank ones skipped and not counted); the first `skip`
 * records left out. `bytes`: the file's bytes read since the batch before, for progress. A line
 * longer than a report can be is handed on cut to MAX_LINE_BYTES + 1 bytes (a record however
 * blank, refused for its length): a file with no line end holds no more than that in memory.
 */
export async function* ndjsonBatches(file: string, size: number, skip = 0): AsyncIterable<{ lines: Buffer; ends: Int32Array; bytes: number }> {
  const handle = await fs.open(file);
  const lines: Buffer[] = [];
  let bytes = 0;
  let skipped = 0;
  /** The first `size` lines (a line split at a CR may have added two at once), or the last ones. */
  const batch = () => {
    const taken = lines.splice(0, size);
    const ends = new Int32Array(taken.length);
    let at = 0;
    taken.forEach((line, i) => (ends[i] = at += line.length));
    const out = { lines: Buffer.concat(taken, at), ends, bytes };
    bytes = 0;
    return out;
  };
  const add = (line: Buffer, cut = false) => {
    // A line that starts as a record does is not blank; any other is decoded to tell.
    if (!cut && (line.length === 0 || (line[0] !== 0x7b && line.toString('utf8').trim() === ''))) return;
    if (skipped < skip) {
      skipped += 1;
      return;
    }
    lines.push(line);
  };
  /** Adds the lines of `text` (no LF in it), split at each CR as readline does. */
  const addSplitAtCr = (text: Buffer) => {
    for (let from = 0; ; ) {
      const cr = text.indexOf(0x0d, from);
      if (cr < 0) return add(text.subarray(from));
      add(text.subarray(from, cr));
      from = cr + 1;
    }
  };
  // The start of a line whose end is not read yet (a line may span blocks; no CR in it), kept to
  // MAX_LINE_BYTES + 1 bytes.
  let carry: Buffer[] = [];
  let carried = 0;
  let cut = false;
  const keep = (tail: Buffer) => {
    const room = MAX_LINE_BYTES + 1 - carried;
    if (tail.length > room) cut = true;
    if (room > 0) carry.push(tail.subarray(0, room));
    carried += Math.min(tail.length, Math.max(room, 0));
  };
  /** Adds `text` (no LF in it): its first line ends the carried one, the others split at each CR. */
  const addAfterCarry = (text: Buffer) => {
    if (carry.length === 0) return addSplitAtCr(text);
    const cr = text.indexOf(0x0d);
    keep(cr < 0 ? text : text.subarray(0, cr));
    const line = Buffer.concat(carry, carried);
    const long = cut;
    [carry, carried, cut] = [[], 0, false];
    add(line, long);
    if (cr >= 0) addSplitAtCr(text.subarray(cr + 1));
  };
  try {
    for (;;) {
      const block = Buffer.allocUnsafe(NDJSON_BLOCK);
      const { bytesRead } = await handle.read(block, 0, NDJSON_BLOCK, null);
      bytes += bytesRead;
      if (bytesRead === 0) {
        // The last line, without its newline (a file that ends mid-line, or without one).
        if (carry.length > 0) addAfterCarry(Buffer.alloc(0));
        while (lines.length > 0) yield batch();
        return;
      }
      const data = block.subarray(0, bytesRead);
      let from = 0;
      for (let lf = data.indexOf(0x0a); lf >= 0; lf = data.indexOf(0x0a, from)) {
        const line = data.subarray(from, lf);
        addAfterCarry(line.length > 0 && line[line.length - 1] === 0x0d ? line.subarray(0, -1) : line);
        from = lf + 1;
        while (lines.length >= size) yield batch();
      }
      if (from < data.length) {
        let tail = data.subarray(from);
        // Lines a lone CR ends are whole: added now, so a file of them is not held until its end.
        // (A CR that is half of a CRLF cut by the block's end leaves an empty line: no record.)
        const cr = tail.lastIndexOf(0x0d);
        if (cr >= 0) {
          addAfterCarry(tail.subarray(0, cr));
          tail = tail.subarray(cr + 1);
          while (lines.length >= size) yield batch();
        }
        if (tail.length > 0) keep(tail);
      }
    }
  } finally {
    await handle.close();
  }
}

/** Levels of objects and lists a record may nest: a report has three. */
export const MAX_NESTING = 32;
/** Why a record nested deeper than that is refused. */
export const NESTED_TOO_DEEP = `the record nests objects or lists more than ${MAX_NESTING} deep: no report does`;

/** A line longer than this is no report (a post's body is at most 64 KiB): refused undecoded. */
export const MAX_LINE_BYTES = 1 << 20;

/** Bytes read from an NDJSON file at once. */
const NDJSON_BLOCK = 1 << 20;

/** A record that cannot be read as a report at all (its reason goes to the rejects). */
export class RecordError extends Error {
  override name = 'RecordError';
  /** The text that is no record (a line that is not JSON): the rejects keep it as it was. */
  constructor(
    message: string,
    readonly text?: string,
  ) {
    super(message);
  }
}

type CityForPoint = (lng: number, lat: number) => string | null;

/** The report's fields toPartnerInput reads, and CogniCity's own pkey (the archive keys a report itself). */
const FIELDS_READ = new Set(['post_id', 'created_at', 'partner_city', 'disaster_type', 'title', 'text', 'image_url', 'pkey']);
/** The point's spellings, read from a record that is not a GeoJSON Feature (a Feature's point is its geometry). */
const POINT_FIELDS = new Set(['location', 'the_geom', 'geom', 'geometry', 'point', 'lat', 'latitude', 'lng', 'lon', 'long', 'longitude']);

/**
 * The names of a record toPartnerInput does not read: its report is imported without them. The
 * feed refuses such a body; an import takes rows of other systems with columns of their own, so
 * it counts them instead, and a misspelt field (`titel`) is told, not lost unseen. A record's
 * `type` (`Feature`) is its shape, not a field.
 */
export function fieldsNotRead(record: unknown): string[] | undefined {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return undefined;
  const r = record as Record<string, unknown>;
  const feature = r.type === 'Feature';
  const props = feature ? r.properties : r;
  if (typeof props !== 'object' || props === null) return undefined;
  // No list made for a record whose every field is read (every line of most files).
  let out: string[] | undefined;
  for (const name in props) {
    if (FIELDS_READ.has(name) || (!feature && (POINT_FIELDS.has(name) || name === 'type'))) continue;
    (out ??= []).push(name);
  }
  return out;
}

/** The fields of a body in the feed's own shape that the feed reads: the rest is counted, not read (fieldsNotRead). */
const FEED_FIELDS = ['post_id', 'created_at', 'partner_city', 'disaster_type', 'title', 'text', 'image_url', 'location'] as const;

/**
 * Whether `r` is a body in the feed's own shape: not a Feature, its point (if any) in `location`
 * and not written as WKT or GeoJSON. Such a record is checked as the feed checks a body, value
 * for value; other systems' rows (GeoJSON, CogniCity's `the_geom`…) are read leniently
 * (toPartnerInput). A CSV row is never one: its header names a point column (csvColumns), and a
 * `location` cell is text.
 */
function isFeedBody(r: Record<string, unknown>): boolean {
  if (r.type === 'Feature') return false;
  for (const name of POINT_FIELDS) if (name !== 'location' && Object.hasOwn(r, name)) return false;
  const at = r.location;
  return typeof at !== 'string' && !(typeof at === 'object' && at !== null && 'type' in at);
}

/**
 * Maps one input record (partner body, GeoJSON Feature, CSV or CogniCity row) to a feed body. A
 * body in the feed's shape goes as it is (its fields not read left out), so the feed's checks
 * answer it as they would a post; another system's row is read as its system writes it: numbers
 * in strings, PostgreSQL's timestamps, an empty cell or null for a field not given, and
 * `partner_city` derived from the point when not given.
 */
export function toPartnerInput(record: unknown, cityForPoint: CityForPoint): Record<string, unknown> {
  if (record instanceof RecordError) throw record;
  if (typeof record !== 'object' || record === null || Array.isArray(record)) throw new RecordError('the record is not an object');
  const r = record as Record<string, unknown>;
  if (isFeedBody(r)) {
    const body: Record<string, unknown> = {};
    for (const field of FEED_FIELDS) if (Object.hasOwn(r, field)) body[field] = r[field];
    return body;
  }
  const props = r.type === 'Feature' ? ((r.properties ?? {}) as Record<string, unknown>) : r;
  const location =
    r.type === 'Feature' ? pointOf(r.geometry) : pointOf(props.location ?? props.the_geom ?? props.geom ?? props.geometry ?? props.point) ?? latLngOf(props);
  if (!location) throw new RecordError('no point: give location {lat,lng}, lat/lng columns, or a GeoJSON or WKT point');
  const given = props.partner_city;
  const partnerCity = given === undefined || given === null || given === '' ? placeOf(location, cityForPoint) || undefined : given;
  if (partnerCity === undefined) {
    throw new RecordError('partner_city missing and the point is in no city of the current boundaries');
  }
  // Only the fields given: an absent one is missing to the schema, not undefined.
  const out: Record<string, unknown> = {};
  if (props.post_id !== undefined) out.post_id = props.post_id;
  const createdAt = normaliseTimestamp(props.created_at);
  if (createdAt !== undefined) out.created_at = createdAt;
  out.partner_city = partnerCity;
  if (props.disaster_type !== undefined) out.disaster_type = props.disaster_type;
  out.location = location;
  for (const field of ['title', 'text', 'image_url'] as const) {
    const value = props[field];
    if (value !== undefined && value !== null && value !== '') out[field] = value;
  }
  return out;
}

/** The city a point is in; a point that is no pair of numbers is refused as such, not as a place in no city. */
function placeOf(location: { lat: unknown; lng: unknown }, cityForPoint: CityForPoint): ReturnType<CityForPoint> {
  if (!Number.isFinite(location.lng) || !Number.isFinite(location.lat)) {
    const shown = (v: unknown) => String(JSON.stringify(v)).slice(0, 40);
    throw new RecordError(`the point's coordinates are no decimal numbers (lat ${shown(location.lat)}, lng ${shown(location.lng)})`);
  }
  return cityForPoint(location.lng as number, location.lat as number);
}

function pointOf(value: unknown): { lat: number; lng: number } | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'string') {
    const wkt = /^\s*(?:SRID=4326;)?POINT\s*\(\s*(-?[\d.]+(?:e-?\d+)?)\s+(-?[\d.]+(?:e-?\d+)?)\s*\)\s*$/i.exec(value);
    if (wkt) return { lng: Number(wkt[1]), lat: Number(wkt[2]) };
    try {
      return pointOf(JSON.parse(value));
    } catch {
      throw new RecordError(`not a GeoJSON or WKT point: ${value.slice(0, 60)}`);
    }
  }
  if (typeof value === 'object') {
    const v = value as { type?: string; coordinates?: unknown; lat?: unknown; lng?: unknown };
    if (v.type === 'Point' && Array.isArray(v.coordinates) && v.coordinates.length >= 2) {
      // As given, for validation to refuse what is no number: Number() made null, "" or false a 0, an [x] its x.
      return { lng: v.coordinates[0] as number, lat: v.coordinates[1] as number };
    }
    if ('lat' in v || 'lng' in v) return { lat: numberOrRaw(v.lat) as number, lng: numberOrRaw(v.lng) as number };
  }
  throw new RecordError('the point is not a GeoJSON Point, a WKT POINT or {lat, lng}');
}

function latLngOf(props: Record<string, unknown>): { lat: number; lng: number } | undefined {
  const lat = props.lat ?? props.latitude;
  const lng = props.lng ?? props.lon ?? props.long ?? props.longitude;
  if (lat === undefined || lng === undefined || lat === '' || lng === '') return undefined;
  return { lat: numberOrRaw(lat) as number, lng: numberOrRaw(lng) as number };
}

/** A decimal number as CSV writes one (`14.65`, `-0.5`, `1.2e2`): not hex, binary or `Infinity`, which Number() reads too. */
const DECIMAL = /^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?\s*$/i;

/** CSV gives strings; keep what is no decimal number as it is, so validation names it. */
function numberOrRaw(value: unknown): unknown {
  if (typeof value === 'string' && DECIMAL.test(value) && Number.isFinite(Number(value))) return Number(value);
  return value;
}

/** Accepts PostgreSQL's `2017-01-01 00:00:00+07` as CogniCity exports write it. */
function normaliseTimestamp(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}(?::?\d{2})?)$/.exec(value.trim());
  if (!m) return value;
  const zone = m[3]!.length === 3 ? `${m[3]}:00` : m[3];
  return `${m[1]}T${m[2]}${zone}`;
}
