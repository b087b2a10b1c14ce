// The Thrift compact codec of the Parquet splice: footers DuckDB writes come back byte for
// byte, the decoded values are the ones DuckDB reports, the encoding is the protocol's, and a
// malformed footer is an error that says where.
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { copyAnswerParquet } from '../../src/archive/answerFormParquet.js';
import { geoCopyOption } from '../../src/archive/geoparquet.js';
import { ARCHIVE_TABLE_DDL } from '../../src/archive/partColumns.js';
import { EXPORT_COLUMNS } from '../../src/archive/sql.js';
import {
  binary,
  decodeStruct,
  encodeStruct,
  field,
  i32,
  i64,
  list,
  listField,
  required,
  requiredList,
  struct,
  ThriftError,
  type Struct,
  type Value,
} from '../../src/archive/thriftCompact.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { writePartFile } from '../support/parts.js';
import { scratch } from '../support/scratch.js';

const work = scratch('thrift-compact-');
/** Files DuckDB wrote, by what they show. */
const files: Record<string, string> = {};

const run = (sql: string) => work.db.withConnection(async (conn) => (await conn.runAndReadAll(sql)).getRowObjectsJS());

async function footerOf(file: string): Promise<Uint8Array> {
  const bytes = await fs.readFile(file);
  const length = bytes.readUInt32LE(bytes.length - 8);
  return bytes.subarray(bytes.length - 8 - length, bytes.length - 8);
}

beforeAll(async () => {
  const part = path.join(work.dir, 'part.parquet');
  await writePartFile(work.db, part, 1, 300, Date.UTC(2026, 10, 14), 60_000);
  files.part = part;
  files.answer = path.join(work.dir, 'answer.parquet');
  files.groups = path.join(work.dir, 'groups.parquet');
  files.empty = path.join(work.dir, 'empty.parquet');
  files.types = path.join(work.dir, 'types.parquet');
  await work.db.withConnection(async (conn) => {
    await copyAnswerParquet(conn, `read_parquet(${sqlString(part)})`, files.answer!);
    await conn.run('SET preserve_insertion_order = true');
    // One row group per chunk of the union: several, with key-value metadata.
    const from = `read_parquet(${sqlString(files.answer!)})`;
    await conn.run(
      `COPY ((FROM ${from} LIMIT 100) UNION ALL (FROM ${from} LIMIT 100 OFFSET 100) UNION ALL (FROM ${from} OFFSET 200))
       TO ${sqlString(files.groups!)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100, KV_METADATA {note: 'ñ', other: 'x'})`,
    );
    await conn.run(`CREATE TEMP TABLE "empty" ${ARCHIVE_TABLE_DDL}`);
    await conn.run(`COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, NULL::BLOB AS geometry FROM "empty") TO ${sqlString(files.empty!)} (FORMAT parquet, ${geoCopyOption(undefined)})`);
    // Types whose footer holds what the answers' do not: nested schemas, logical types, more statistics.
    await conn.run(
      `COPY (SELECT i::TINYINT AS tiny, (i * 300)::SMALLINT AS small, (i + 50)::UBIGINT AS ubig, (i / 7)::DECIMAL(9, 3) AS dec, i % 2 = 0 AS flag,
                    DATE '2026-01-01' + i::INTEGER AS day, make_timestamp(i::BIGINT * 1000000)::TIMESTAMP_NS AS ns, [i, i + 1] AS pair,
                    {'a': i, 'b': 'x' || i} AS rec, MAP {'k': i} AS m, (i / 3)::FLOAT AS f, uuid() AS id, make_time(1, 2, 3 + (i + 50) / 7) AS clock
             FROM range(-50, 50) t(i))
       TO ${sqlString(files.types!)} (FORMAT parquet)`,
    );
  });
});

describe('footers DuckDB writes', () => {
  it('decode and encode back byte for byte', async () => {
    for (const [name, file] of Object.entries(files)) {
      const footer = await footerOf(file);
      expect(Buffer.from(encodeStruct(decodeStruct(footer))).equals(footer), name).toBe(true);
    }
  });

  it("decode to what DuckDB's own metadata says: rows, row groups, chunk offsets, schema, key-value metadata", async () => {
    for (const [name, file] of Object.entries(files)) {
      const meta = decodeStruct(await footerOf(file));
      const chunks = (await run(`SELECT row_group_id, column_id, data_page_offset, total_compressed_size, num_values FROM parquet_metadata(${sqlString(file)}) ORDER BY ALL`)) as {
        row_group_id: bigint;
        column_id: bigint;
        data_page_offset: bigint;
        total_compressed_size: bigint;
        num_values: bigint;
      }[];
      const groups = listField(meta, 4, 'struct') ?? [];
      expect(Number(required(meta, 3, 'i64')), name).toBe(Number((await run(`SELECT count(*) AS n FROM read_parquet(${sqlString(file)})`))[0]!.n));
      expect(groups.length, name).toBe(new Set(chunks.map((c) => c.row_group_id)).size);
      const decoded = groups.flatMap((g, row_group_id) =>
        requiredList(g, 1, 'struct').map((c, column_id) => {
          const m = required(c, 3, 'struct');
          return { row_group_id: BigInt(row_group_id), column_id: BigInt(column_id), data_page_offset: field(m, 9, 'i64'), total_compressed_size: field(m, 7, 'i64'), num_values: field(m, 5, 'i64') };
        }),
      );
      expect(decoded, name).toEqual(chunks);
      const names = (await run(`SELECT name FROM parquet_schema(${sqlString(file)})`)).map((r) => r.name);
      expect(requiredList(meta, 2, 'struct').map((e) => Buffer.from(required(e, 4, 'binary')).toString()), name).toEqual(names);
    }
    const kv = listField(decodeStruct(await footerOf(files.groups!)), 5, 'struct')!;
    expect(kv.map((e) => [Buffer.from(required(e, 1, 'binary')).toString(), Buffer.from(required(e, 2, 'binary')).toString()])).toEqual([
      ['note', 'ñ'],
      ['other', 'x'],
    ]);
  });

  it('read bools from the field header: a TIME column is TimeType{isAdjustedToUTC: false}', async () => {
    const schema = requiredList(decodeStruct(await footerOf(files.types!)), 2, 'struct');
    const time = schema.find((e) => Buffer.from(field(e, 4, 'binary') ?? []).toString() === 'clock')!;
    // SchemaElement.logicalType (10), LogicalType.TIME (7), TimeType.isAdjustedToUTC (1).
    expect(required(required(required(time, 10, 'struct'), 7, 'struct'), 1, 'bool')).toBe(false);
  });
});

describe('the encoding', () => {
  /** Known encodings, by the protocol's specification. */
  const cases: [string, Struct, number[]][] = [
    ['i32 3, short header', new Map([[1, i32(3)]]), [0x15, 0x06, 0x00]],
    ['i32 -1 then i64 1 (zigzag)', new Map<number, Value>([[1, i32(-1)], [2, i64(1n)]]), [0x15, 0x01, 0x16, 0x02, 0x00]],
    ['bools in the header', new Map<number, Value>([[1, { type: 'bool', value: true }], [3, { type: 'bool', value: false }]]), [0x11, 0x22, 0x00]],
    ['long header for a delta over 15', new Map([[100, i32(0)]]), [0x05, 0xc8, 0x01, 0x00, 0x00]],
    ['id order whatever the map order', new Map([[2, i32(0)], [1, i32(0)]]), [0x15, 0x00, 0x15, 0x00, 0x00]],
    ['i8, i16', new Map<number, Value>([[1, { type: 'i8', value: -1 }], [2, { type: 'i16', value: -300 }]]), [0x13, 0xff, 0x14, 0xd7, 0x04, 0x00]],
    ['double, little-endian', new Map<number, Value>([[1, { type: 'double', value: 1 }]]), [0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x00]],
    ['binary', new Map([[1, binary('hé')]]), [0x18, 0x03, 0x68, 0xc3, 0xa9, 0x00]],
    ['i64 extremes', new Map([[1, i64(-(2n ** 63n))], [2, i64(2n ** 63n - 1n)]]), [0x16, ...Array(9).fill(0xff), 0x01, 0x16, 0xfe, ...Array(8).fill(0xff), 0x01, 0x00]],
    ['list of bools', new Map([[1, list('bool', [{ type: 'bool', value: true }, { type: 'bool', value: false }])]]), [0x19, 0x22, 0x01, 0x00, 0x00]],
    ['empty struct, nested', new Map([[1, struct(new Map([[2, struct(new Map())]]))]]), [0x1c, 0x2c, 0x00, 0x00, 0x00]],
    // Other writers' IntType (LogicalType.INTEGER): bitWidth is an i8, and stays one.
    ['a field of another writer', new Map([[10, struct(new Map<number, Value>([[1, { type: 'i8', value: 8 }], [2, { type: 'bool', value: true }]]))]]), [0xac, 0x13, 0x08, 0x11, 0x00, 0x00]],
    ['list of 15: long header', new Map([[1, list('i32', Array.from({ length: 15 }, () => i32(1)))]]), [0x19, 0xf5, 0x0f, ...Array(15).fill(0x02), 0x00]],
  ];

  it.each(cases)('%s', (_, s, bytes) => {
    expect([...encodeStruct(s)]).toEqual(bytes);
    expect(decodeStruct(Uint8Array.from(bytes))).toEqual(new Map([...s].sort(([a], [b]) => a - b)));
  });

  it('a field read as another type than its own is an error', () => {
    const s = decodeStruct(Uint8Array.from([0xac, 0x13, 0x08, 0x00, 0x00]));
    expect(() => field(required(s, 10, 'struct'), 1, 'i32')).toThrow(new ThriftError('field 1 is i8, not i32'));
  });

  it('refuses values its type cannot hold, and lists of mixed types', () => {
    expect(() => encodeStruct(new Map([[1, i32(2 ** 31)]]))).toThrow(ThriftError);
    expect(() => encodeStruct(new Map<number, Value>([[1, { type: 'i8', value: 128 }]]))).toThrow(ThriftError);
    expect(() => encodeStruct(new Map([[1, list('i32', [i64(1n)])]]))).toThrow(ThriftError);
  });
});

describe('a malformed footer', () => {
  it('cut anywhere: an error naming the truncation, never a hang', async () => {
    const footer = await footerOf(files.groups!);
    for (let n = 0; n < footer.byteLength; n++) {
      expect(() => decodeStruct(footer.subarray(0, n)), `first ${n} bytes`).toThrow(/^truncated: .* \(byte \d+ of \d+\)$/);
    }
  });

  it('with bytes after its end', async () => {
    const footer = await footerOf(files.answer!);
    expect(() => decodeStruct(Buffer.concat([footer, Buffer.from([0])]))).toThrow(/1 bytes after the struct's end/);
  });

  it('with sizes, lengths or nesting it cannot have: refused before anything is allocated', () => {
    // A list of 2^31 i32 in 7 bytes.
    expect(() => decodeStruct(Uint8Array.from([0x19, 0xf5, 0x80, 0x80, 0x80, 0x80, 0x08]))).toThrow(/truncated: a list of 2147483648 needs/);
    expect(() => decodeStruct(Uint8Array.from([0x18, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toThrow(/truncated: binary needs 4294967295 bytes/);
    expect(() => decodeStruct(Uint8Array.from([0x16, ...Array(11).fill(0xff), 0x00]))).toThrow(/varint longer than 10 bytes/);
    expect(() => decodeStruct(Uint8Array.from([0x15, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]))).toThrow(/varint beyond 32 bits/);
    expect(() => decodeStruct(Uint8Array.from([...Array(100).fill(0x1c), ...Array(101).fill(0x00)]))).toThrow(/nested deeper than 64/);
    expect(() => decodeStruct(Uint8Array.from([0x1b, 0x00, 0x00]))).toThrow(/unsupported type map/);
    expect(() => decodeStruct(Uint8Array.from([0x15, 0x00, 0x05, 0x02, 0x00, 0x00]))).toThrow(/field 1 twice/);
  });
});
