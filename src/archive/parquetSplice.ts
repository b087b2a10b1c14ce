// One Parquet file made of the row groups of others, copied byte for byte: a window's Parquet
// answer is the stored answer-form row groups of its parts (and DuckDB's for what cannot be
// copied), with a new footer. A row group's column chunks are self-contained (pages, their
// dictionary, their statistics), so copying them needs no decoding: only the offsets in the
// footer move.
//
// Format note. A Parquet file is `PAR1`, the row groups' column chunks, then the footer: a
// FileMetaData struct (Thrift compact protocol, see thriftCompact.ts), its length (u32 LE) and
// `PAR1`. The splice reads each source's footer and writes one of:
// - FileMetaData: the first source's, with num_rows (3) the sum, row_groups (4) every source's
//   in order, key_value_metadata (5) the first's but `geo`, then a new `geo`; schema (2),
//   created_by (6), column_orders (7) and the rest as they were.
// - RowGroup: as it was, with file_offset (5) moved and ordinal (7), the group's index in its
//   source, left out (it is optional).
// - ColumnChunk: file_offset (2, deprecated; 0 when the writer left it unset) moved and
//   meta_data (3); the page index offsets (4 to 7) are left out, page indexes are not copied
//   (written after all row groups, they are not part of one), nor are file_path or
//   encryption (DuckDB's answers have neither).
// - ColumnMetaData: data_page_offset (9), index_page_offset (10), dictionary_page_offset (11)
//   moved; bloom_filter_offset (14) set where the filter is copied to, just after its row group;
//   statistics (12) read for the `geo` bbox; everything else kept as read.
// Offsets are absolute in the file, so a row group copied from offset `from` to `at` moves
// them all by `at - from`. Fields are kept with the wire types they were read with, so
// everything the splice does not touch is written back as DuckDB wrote it.
import type { FileHandle } from 'node:fs/promises';
import { geoMetadata, type Bbox } from './geoparquet.js';
import { binary, decodeStruct, encodeStruct, encodeValue, field, i64, list, listField, put, required, requiredList, struct, type Struct } from './thriftCompact.js';

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

/** Field ids of parquet.thrift's structs, those the splice reads or writes. */
const FileMetaData = { schema: 2, num_rows: 3, row_groups: 4, key_value_metadata: 5 } as const;
const SchemaElement = { name: 4, num_children: 5 } as const;
const RowGroup = { columns: 1, num_rows: 3, file_offset: 5, ordinal: 7 } as const;
const ColumnChunk = { file_offset: 2, meta_data: 3 } as const;
const ColumnMetaData = {
  num_values: 5,
  total_compressed_size: 7,
  data_page_offset: 9,
  index_page_offset: 10,
  dictionary_page_offset: 11,
  statistics: 12,
  bloom_filter_offset: 14,
  bloom_filter_length: 15,
} as const;
const Statistics = { max: 1, min: 2, max_value: 5, min_value: 6 } as const;
const KeyValue = { key: 1, value: 2 } as const;

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
  if (source.length < 12) throw new Error(`not a Parquet file (${source.length} bytes)`);
  const tail = await readAt(source.handle, source.offset + source.length - 8, 8);
  if (!tail.subarray(4).equals(MAGIC)) throw new Error('not a Parquet file');
  const length = tail.readUInt32LE(0);
  if (length > source.length - 12) throw new Error(`Parquet footer of ${length} bytes in a file of ${source.length}`);
  const bytes = await readAt(source.handle, source.offset + source.length - 8 - length, length);
  try {
    return { source, meta: decodeStruct(bytes) };
  } catch (err) {
    throw new Error(`Parquet footer unreadable: ${(err as Error).message}`, { cause: err });
  }
}

/** Rows in a footer's file. */
export const rowsOf = (footer: Footer) => Number(required(footer.meta, FileMetaData.num_rows, 'i64'));

/** The schema of a footer, comparable (two files splice only if theirs are equal): its encoding. */
export function schemaOf(footer: Footer): string {
  const schema = footer.meta.get(FileMetaData.schema);
  return schema ? Buffer.from(encodeValue(schema)).toString('base64') : '';
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
  const leaves = requiredList(first, FileMetaData.schema, 'struct')
    .filter((e) => !e.has(SchemaElement.num_children))
    .map((e) => textOf(required(e, SchemaElement.name, 'binary')));
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
    for (const group of listField(meta, FileMetaData.row_groups, 'struct') ?? []) {
      const chunks = requiredList(group, RowGroup.columns, 'struct');
      const metas = chunks.map((c) => required(c, ColumnChunk.meta_data, 'struct'));
      const starts = metas.map((m) => Number(field(m, ColumnMetaData.dictionary_page_offset, 'i64') ?? required(m, ColumnMetaData.data_page_offset, 'i64')));
      const from = Math.min(...starts);
      const end = Math.max(...metas.map((m, i) => starts[i]! + Number(required(m, ColumnMetaData.total_compressed_size, 'i64'))));
      const shift = BigInt(at - from);
      const moved = (s: Struct, id: number) => {
        const v = field(s, id, 'i64');
        return v === undefined ? undefined : i64(v + shift);
      };
      copy(source.handle, source.offset + from, end - from);
      at += end - from;
      const columns = chunks.map((c, i) => {
        const m: Struct = new Map(metas[i]!);
        for (const id of [ColumnMetaData.data_page_offset, ColumnMetaData.index_page_offset, ColumnMetaData.dictionary_page_offset]) put(m, id, moved(m, id));
        m.delete(ColumnMetaData.bloom_filter_offset);
        m.delete(ColumnMetaData.bloom_filter_length);
        const chunk: Struct = new Map();
        put(chunk, ColumnChunk.file_offset, field(c, ColumnChunk.file_offset, 'i64') === 0n ? i64(0n) : moved(c, ColumnChunk.file_offset));
        chunk.set(ColumnChunk.meta_data, struct(m));
        return { chunk, meta: m };
      });
      // Bloom filters follow the row group they belong to.
      metas.forEach((m, i) => {
        const offset = field(m, ColumnMetaData.bloom_filter_offset, 'i64');
        const length = field(m, ColumnMetaData.bloom_filter_length, 'i32');
        if (offset === undefined || length === undefined) return;
        copy(source.handle, source.offset + Number(offset), length);
        columns[i]!.meta.set(ColumnMetaData.bloom_filter_offset, i64(BigInt(at)));
        columns[i]!.meta.set(ColumnMetaData.bloom_filter_length, m.get(ColumnMetaData.bloom_filter_length)!);
        at += length;
      });
      const out: Struct = new Map(group);
      out.set(RowGroup.columns, list('struct', columns.map((c) => struct(c.chunk))));
      put(out, RowGroup.file_offset, moved(group, RowGroup.file_offset));
      out.delete(RowGroup.ordinal);
      rowGroups.push(out);
      rows += required(group, RowGroup.num_rows, 'i64');
      bbox = unionOf(bbox, boundsOf(metas, lng, lat));
    }
  }
  const kv = (listField(first, FileMetaData.key_value_metadata, 'struct') ?? []).filter((e) => textOf(required(e, KeyValue.key, 'binary')) !== 'geo');
  const geo: Struct = new Map([
    [KeyValue.key, binary('geo')],
    [KeyValue.value, binary(geoMetadata(bbox))],
  ]);
  const meta: Struct = new Map(first);
  meta.set(FileMetaData.num_rows, i64(rows));
  meta.set(FileMetaData.row_groups, list('struct', rowGroups.map(struct)));
  meta.set(FileMetaData.key_value_metadata, list('struct', [...kv, geo].map(struct)));
  const footerBytes = encodeStruct(meta);
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

const textOf = (v: Uint8Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('utf8');

/** [minLng, minLat, maxLng, maxLat] of a row group from its exact lng/lat statistics. */
function boundsOf(metas: Struct[], lng: number, lat: number): Bbox | undefined {
  const stat = (i: number, min: boolean) => {
    const m = metas[i];
    const s = m && field(m, ColumnMetaData.statistics, 'struct');
    const v = s && (min ? (field(s, Statistics.min_value, 'binary') ?? field(s, Statistics.min, 'binary')) : (field(s, Statistics.max_value, 'binary') ?? field(s, Statistics.max, 'binary')));
    if (!v || v.byteLength !== 8) throw new Error('a row group without lng/lat statistics cannot give the answer its bbox');
    return Buffer.from(v.buffer, v.byteOffset, 8).readDoubleLE(0);
  };
  const m = metas[lng];
  if (m && field(m, ColumnMetaData.num_values, 'i64') === 0n) return undefined;
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
