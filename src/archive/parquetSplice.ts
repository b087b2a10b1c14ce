// One Parquet file made of the row groups of others, copied byte for byte: a window's Parquet
// answer is the stored answer-form row groups of its parts (and DuckDB's for what cannot be
// copied), with a new footer. A row group's column chunks are self-contained (pages, their
// dictionary, their statistics), so copying them needs no decoding: only the offsets in the
// footer move. The footer is Thrift (compact protocol), read and written by hyparquet's and
// hyparquet-writer's codecs as a generic tree, so every field DuckDB wrote is kept as it was.
import type { FileHandle } from 'node:fs/promises';
import { deserializeTCompactProtocol } from 'hyparquet/src/thrift.js';
import { serializeTCompactProtocol } from 'hyparquet-writer/src/thrift.js';
import { ByteWriter } from 'hyparquet-writer';
import { geoMetadata, type Bbox } from './geoparquet.js';

const MAGIC = Buffer.from('PAR1');

/**
 * A Parquet file, whole or embedded at `offset` in a larger file (a sidecar). Open: the
 * version read is the one copied, whatever replaces the file meanwhile.
 */
export interface ParquetSource {
  handle: FileHandle;
  offset: number;
  length: number;
}

/** Thrift structs as the codec gives them: `field_<id>` → value (i64 as bigint); untyped, as the codec's own. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Struct = { [field: `field_${number}`]: any };

export interface Footer {
  source: ParquetSource;
  meta: Struct;
}

/** A byte range of a source to copy. */
interface Copy {
  handle: FileHandle;
  from: number;
  length: number;
}

/** A Parquet answer: its size (known before a byte is sent) and its bytes, in order. */
export interface ParquetAnswer {
  size: number;
  /** The bytes; the sources are closed once they are read (or the reading stops). */
  chunks(): AsyncIterable<Uint8Array>;
  /** Closes the sources (for an answer whose bytes will not be read). */
  close(): Promise<void>;
}

/** Reads a source's footer (FileMetaData). */
export async function readFooter(source: ParquetSource): Promise<Footer> {
  const tail = await readAt(source.handle, source.offset + source.length - 8, 8);
  if (!tail.subarray(4).equals(MAGIC)) throw new Error('not a Parquet file');
  const length = tail.readUInt32LE(0);
  const bytes = await readAt(source.handle, source.offset + source.length - 8 - length, length);
  return { source, meta: deserializeTCompactProtocol({ view: new DataView(bytes.buffer, bytes.byteOffset, length), offset: 0 }) };
}

/** Rows in a footer's file. */
export const rowsOf = (footer: Footer) => Number(footer.meta.field_3 as bigint);

/** The schema of a footer, comparable (two files splice only if theirs are equal). */
export function schemaOf(footer: Footer): string {
  return JSON.stringify(footer.meta.field_2, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v));
}

/**
 * Splices the row groups of `footers` (all with one schema), in order, into one GeoParquet
 * file: the first file's schema, writer and key-value metadata, the `geo` metadata's bbox made
 * from the row groups' lng/lat statistics. Each row group's chunks are copied with their bloom
 * filters; page indexes (written after all row groups) are not carried over.
 */
export function spliceParquet(footers: readonly Footer[]): ParquetAnswer {
  if (footers.length === 0) throw new Error('nothing to splice');
  const first = footers[0]!.meta;
  const schema = schemaOf(footers[0]!);
  if (footers.some((f) => schemaOf(f) !== schema)) throw new Error('row groups of different schemas cannot be spliced');
  const leaves = (first.field_2 as Struct[]).filter((e) => e.field_5 === undefined).map((e) => textOf(e.field_4));
  const lng = leaves.indexOf('lng');
  const lat = leaves.indexOf('lat');
  const copies: Copy[] = [];
  // Ranges that follow each other in one source (a row group's chunks, then its bloom filters) are one read.
  const copy = (handle: FileHandle, from: number, length: number) => {
    const last = copies[copies.length - 1];
    if (last && last.handle === handle && last.from + last.length === from) last.length += length;
    else copies.push({ handle, from, length });
  };
  const rowGroups: Struct[] = [];
  let at = MAGIC.length;
  let rows = 0n;
  let bbox: Bbox | undefined;
  for (const { source, meta } of footers) {
    for (const group of meta.field_4 as Struct[]) {
      const chunks = group.field_1 as Struct[];
      const starts = chunks.map((c) => Number(c.field_3.field_11 ?? c.field_3.field_9));
      const from = Math.min(...starts);
      const end = Math.max(...chunks.map((c, i) => starts[i]! + Number(c.field_3.field_7)));
      const shift = BigInt(at - from);
      const move = (v: bigint | undefined) => (v === undefined ? undefined : v + shift);
      const fileOffset = move(group.field_5 as bigint | undefined);
      copy(source.handle, source.offset + from, end - from);
      at += end - from;
      const moved = chunks.map((c) => {
        const m = c.field_3 as Struct;
        // Page indexes (field 4 to 7) are not carried over.
        return {
          // The deprecated offset of the chunk's metadata: 0 when the writer left it unset.
          field_2: c.field_2 === 0n ? 0n : move(c.field_2),
          field_3: { ...m, field_9: move(m.field_9), field_10: move(m.field_10), field_11: move(m.field_11), field_14: undefined, field_15: undefined },
        } as Struct;
      });
      // Bloom filters follow the row group they belong to.
      chunks.forEach((c, i) => {
        const m = c.field_3 as Struct;
        if (m.field_14 === undefined || m.field_15 === undefined) return;
        copy(source.handle, source.offset + Number(m.field_14), m.field_15 as number);
        moved[i]!.field_3 = { ...moved[i]!.field_3, field_14: BigInt(at), field_15: m.field_15 };
        at += m.field_15 as number;
      });
      // `ordinal` (an i16 the generic codec would write as an i32) is left out: it is optional.
      rowGroups.push(sorted({ ...group, field_1: moved.map((c) => sorted({ ...c, field_3: sorted(c.field_3) })), field_5: fileOffset, field_7: undefined }));
      rows += group.field_3 as bigint;
      bbox = unionOf(bbox, boundsOf(chunks, lng, lat));
    }
  }
  const kv = ((first.field_5 ?? []) as Struct[]).filter((e) => textOf(e.field_1) !== 'geo');
  const footer = new ByteWriter();
  serializeTCompactProtocol(
    footer,
    sorted({
      ...first,
      field_3: rows,
      field_4: rowGroups,
      field_5: [...kv, { field_1: 'geo', field_2: geoMetadata(bbox) }],
    }),
  );
  const footerBytes = new Uint8Array(footer.getBuffer());
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(footerBytes.byteLength, 0);
  MAGIC.copy(tail, 4);
  const close = () => closeAll(footers.map((f) => f.source.handle));
  return {
    size: at + footerBytes.byteLength + tail.length,
    async *chunks() {
      try {
        yield MAGIC;
        yield* copyRanges(copies);
        yield footerBytes;
        yield tail;
      } finally {
        await close();
      }
    },
    close,
  };
}

/** Closes handles (each once: sources of one sidecar share it). */
export async function closeAll(handles: readonly FileHandle[]): Promise<void> {
  await Promise.all([...new Set(handles)].map((h) => h.close().catch(() => undefined)));
}

/** The struct with its fields in id order, as the compact protocol writes them. */
function sorted(s: Struct): Struct {
  const id = (k: string) => Number(k.slice('field_'.length));
  return Object.fromEntries(Object.entries(s).sort(([a], [b]) => id(a) - id(b))) as Struct;
}

const textOf = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : String(v));

/** [minLng, minLat, maxLng, maxLat] of a row group from its exact lng/lat statistics. */
function boundsOf(chunks: Struct[], lng: number, lat: number): Bbox | undefined {
  const stat = (i: number, min: boolean) => {
    const s = chunks[i]?.field_3?.field_12 as Struct | undefined;
    const v = (min ? (s?.field_6 ?? s?.field_2) : (s?.field_5 ?? s?.field_1)) as Uint8Array | undefined;
    if (!v || v.byteLength !== 8) throw new Error('a row group without lng/lat statistics cannot give the answer its bbox');
    return Buffer.from(v).readDoubleLE(0);
  };
  const n = chunks[lng]?.field_3?.field_5 as bigint | undefined;
  if (n === 0n) return undefined;
  return [stat(lng, true), stat(lat, true), stat(lng, false), stat(lat, false)];
}

function unionOf(a: Bbox | undefined, b: Bbox | undefined): Bbox | undefined {
  if (!a) return b;
  if (!b) return a;
  return [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])];
}

/** Bytes read per read: a few sidecars' day of row groups each. */
const READ_BYTES = 1 << 20;

/** The ranges' bytes in order, a bounded read at a time (the consumer's pace sets the reading). */
async function* copyRanges(copies: readonly Copy[]): AsyncIterable<Uint8Array> {
  for (const c of copies) {
    for (let done = 0; done < c.length; ) {
      const n = Math.min(READ_BYTES, c.length - done);
      yield await readAt(c.handle, c.from + done, n);
      done += n;
    }
  }
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(length);
  for (let off = 0; off < length; ) {
    const { bytesRead } = await fh.read(out, off, length - off, position + off);
    if (bytesRead === 0) throw new Error('Parquet source truncated');
    off += bytesRead;
  }
  return out;
}
