// The Thrift compact protocol (apache/thrift, doc/specs/thrift-compact-protocol.md): how a
// Parquet footer (FileMetaData, parquet.thrift) is encoded. The Parquet splice reads footers
// and writes one; this is its codec.
//
// Generic, not generated from parquet.thrift: a struct is its fields by id, each with the wire
// type it was read with, so a footer written back is byte for byte the one read, fields this
// service knows nothing about (whatever newer Parquet features DuckDB writes) included. The
// caller names the type it expects when it reads a field, and gets an error if the file says
// otherwise.
//
// Subset: structs, lists and the scalars (bool, i8, i16, i32, i64, double, binary), which is
// all parquet.thrift uses. Sets, maps, UUIDs and RPC messages are refused (an error, not a
// skip: a footer holding one is not one we can copy). Encoding is canonical, as Thrift's own
// libraries write it: fields in id order, short headers whenever the id delta is 1-15, short
// list headers below 15 elements, minimal varints.
//
// Footers come from files: every read is bounded by the bytes given, a varint by its type's
// length, nesting by MAX_DEPTH, a length by the bytes left; a malformed or truncated footer is
// a ThriftError saying where, never a hang or a huge allocation.

export type ThriftType = 'bool' | 'i8' | 'i16' | 'i32' | 'i64' | 'double' | 'binary' | 'list' | 'struct';

export type Value =
  | { type: 'bool'; value: boolean }
  | { type: 'i8'; value: number }
  | { type: 'i16'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'i64'; value: bigint }
  | { type: 'double'; value: number }
  /** Binary and string fields alike; a decoded one views the bytes it was read from. */
  | { type: 'binary'; value: Uint8Array }
  | { type: 'list'; element: ThriftType; value: Value[] }
  | { type: 'struct'; value: Struct };

/** A struct: its fields by id (written in id order whatever the map's order). */
export type Struct = Map<number, Value>;

type ValueOf<T extends ThriftType> = { [K in ThriftType]: Extract<Value, { type: K }>['value'] }[T];

export class ThriftError extends Error {
  override name = 'ThriftError';
}

export const i32 = (value: number): Value => ({ type: 'i32', value });
export const i64 = (value: bigint): Value => ({ type: 'i64', value });
export const binary = (value: Uint8Array | string): Value => ({ type: 'binary', value: typeof value === 'string' ? new TextEncoder().encode(value) : value });
export const struct = (value: Struct): Value => ({ type: 'struct', value });
export const list = (element: ThriftType, value: Value[]): Value => ({ type: 'list', element, value });

/** Field `id` of `s`, which must be of `type` if present. */
export function field<T extends ThriftType>(s: Struct, id: number, type: T): ValueOf<T> | undefined {
  const v = s.get(id);
  if (v === undefined) return undefined;
  if (v.type !== type) throw new ThriftError(`field ${id} is ${v.type}, not ${type}`);
  return v.value as ValueOf<T>;
}

/** Field `id` of `s`, which must be present and of `type`. */
export function required<T extends ThriftType>(s: Struct, id: number, type: T): ValueOf<T> {
  const v = field(s, id, type);
  if (v === undefined) throw new ThriftError(`field ${id} (${type}) missing`);
  return v;
}

/** The elements of list field `id` of `s`, which must be of `element` if present. */
export function listField<T extends ThriftType>(s: Struct, id: number, element: T): ValueOf<T>[] | undefined {
  const items = field(s, id, 'list');
  if (items === undefined) return undefined;
  return items.map((v) => {
    if (v.type !== element) throw new ThriftError(`field ${id} is a list of ${v.type}, not of ${element}`);
    return v.value as ValueOf<T>;
  });
}

/** The elements of list field `id` of `s`, which must be present and of `element`. */
export function requiredList<T extends ThriftType>(s: Struct, id: number, element: T): ValueOf<T>[] {
  const items = listField(s, id, element);
  if (items === undefined) throw new ThriftError(`field ${id} (list) missing`);
  return items;
}

/** Sets field `id` of `s`, or removes it when `value` is undefined. */
export function put(s: Struct, id: number, value: Value | undefined): void {
  if (value === undefined) s.delete(id);
  else s.set(id, value);
}

// Wire type ids: field headers and list headers (bools differ: a field's value is its type,
// true 1 or false 2; a list's elements are typed 2, each a byte).
const STOP = 0;
const TRUE = 1;
const FALSE = 2;
const BOOL_ELEMENT = 2;
const CODES: Record<Exclude<ThriftType, 'bool'>, number> = { i8: 3, i16: 4, i32: 5, i64: 6, double: 7, binary: 8, list: 9, struct: 12 };
const TYPES = new Map<number, ThriftType>(Object.entries(CODES).map(([t, c]) => [c, t as ThriftType]));
const UNSUPPORTED: Record<number, string> = { 10: 'set', 11: 'map', 13: 'uuid' };

/** Structs within structs or lists, at most: Parquet's footer nests a few levels. */
const MAX_DEPTH = 64;

/** Decodes one struct, which must fill `bytes` exactly. */
export function decodeStruct(bytes: Uint8Array): Struct {
  const reader = new Reader(bytes);
  const s = reader.struct(0);
  if (reader.offset !== bytes.byteLength) throw new ThriftError(`${bytes.byteLength - reader.offset} bytes after the struct's end (byte ${reader.offset})`);
  return s;
}

/** Encodes a struct. */
export function encodeStruct(s: Struct): Uint8Array {
  const writer = new Writer();
  writer.struct(s, 0);
  return writer.bytes();
}

/** Encodes one value as it would be written in a struct or list (for comparing values). */
export function encodeValue(v: Value): Uint8Array {
  const writer = new Writer();
  writer.value(v, 0);
  return writer.bytes();
}

class Reader {
  offset = 0;
  private readonly view: DataView;

  constructor(private readonly input: Uint8Array) {
    this.view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  }

  private fail(what: string): never {
    throw new ThriftError(`${what} (byte ${this.offset} of ${this.input.byteLength})`);
  }

  private need(n: number, what: string): void {
    if (n > this.input.byteLength - this.offset) this.fail(`truncated: ${what} needs ${n} bytes, ${this.input.byteLength - this.offset} left`);
  }

  private byte(what: string): number {
    this.need(1, what);
    return this.input[this.offset++]!;
  }

  /** An unsigned varint of at most 32 bits. */
  private varint32(what: string): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.byte(what);
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) {
        if (result > 0xffff_ffff) this.fail(`${what}: varint beyond 32 bits`);
        return result;
      }
    }
    return this.fail(`${what}: varint longer than 5 bytes`);
  }

  /** An unsigned varint of at most 64 bits. */
  private varint64(what: string): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const b = this.byte(what);
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) {
        if (result > 0xffff_ffff_ffff_ffffn) this.fail(`${what}: varint beyond 64 bits`);
        return result;
      }
    }
    return this.fail(`${what}: varint longer than 10 bytes`);
  }

  private zigzag32(what: string): number {
    const n = this.varint32(what);
    return (n >>> 1) ^ -(n & 1);
  }

  struct(depth: number): Struct {
    if (depth > MAX_DEPTH) this.fail(`nested deeper than ${MAX_DEPTH}`);
    const s: Struct = new Map();
    let id = 0;
    for (;;) {
      const header = this.byte('field header');
      const code = header & 0x0f;
      if (code === STOP) return s;
      const delta = header >> 4;
      id = delta === 0 ? this.zigzag32('field id') : id + delta;
      if (s.has(id)) this.fail(`field ${id} twice`);
      s.set(id, code === TRUE || code === FALSE ? { type: 'bool', value: code === TRUE } : this.value(this.type(code), depth));
    }
  }

  private type(code: number): ThriftType {
    const type = TYPES.get(code);
    if (type === undefined) this.fail(UNSUPPORTED[code] ? `unsupported type ${UNSUPPORTED[code]}` : `unknown type ${code}`);
    return type;
  }

  private value(type: ThriftType, depth: number): Value {
    switch (type) {
      case 'bool':
        // Only as a list element: one byte, 1 for true (0, or 2 as some writers do, for false).
        return { type, value: this.byte('bool') === 1 };
      case 'i8':
        return { type, value: (this.byte('i8') << 24) >> 24 };
      case 'i16': {
        const value = this.zigzag32('i16');
        if (value < -0x8000 || value > 0x7fff) this.fail(`i16 out of range: ${value}`);
        return { type, value };
      }
      case 'i32':
        return { type, value: this.zigzag32('i32') };
      case 'i64': {
        const n = this.varint64('i64');
        return { type, value: (n >> 1n) ^ -(n & 1n) };
      }
      case 'double': {
        this.need(8, 'double');
        const value = this.view.getFloat64(this.offset, true);
        this.offset += 8;
        return { type, value };
      }
      case 'binary': {
        const length = this.varint32('binary length');
        this.need(length, 'binary');
        const value = this.input.subarray(this.offset, this.offset + length);
        this.offset += length;
        return { type, value };
      }
      case 'list': {
        const header = this.byte('list header');
        const code = header & 0x0f;
        const element = code === TRUE || code === BOOL_ELEMENT ? 'bool' : this.type(code);
        const size = header >> 4 === 15 ? this.varint32('list size') : header >> 4;
        // Every element takes a byte at least: a larger size is a corrupt one, not an allocation to make.
        this.need(size, `a list of ${size}`);
        const value: Value[] = [];
        for (let i = 0; i < size; i++) value.push(this.value(element, depth + 1));
        return { type, element, value };
      }
      case 'struct':
        return { type, value: this.struct(depth + 1) };
    }
  }
}

class Writer {
  private buf = new Uint8Array(1024);
  private length = 0;

  bytes(): Uint8Array {
    return this.buf.slice(0, this.length);
  }

  private room(n: number): void {
    if (this.length + n <= this.buf.byteLength) return;
    const grown = new Uint8Array(Math.max(this.buf.byteLength * 2, this.length + n));
    grown.set(this.buf.subarray(0, this.length));
    this.buf = grown;
  }

  private byte(b: number): void {
    this.room(1);
    this.buf[this.length++] = b & 0xff;
  }

  private varint32(n: number): void {
    for (let v = n >>> 0; ; v >>>= 7) {
      if (v < 0x80) return this.byte(v);
      this.byte((v & 0x7f) | 0x80);
    }
  }

  private varint64(n: bigint): void {
    for (let v = n; ; v >>= 7n) {
      if (v < 0x80n) return this.byte(Number(v));
      this.byte(Number(v & 0x7fn) | 0x80);
    }
  }

  private zigzag32(n: number, type: 'i16' | 'i32'): void {
    const [min, max] = type === 'i16' ? [-0x8000, 0x7fff] : [-0x8000_0000, 0x7fff_ffff];
    if (!Number.isInteger(n) || n < min || n > max) throw new ThriftError(`${type} out of range: ${n}`);
    this.varint32((n << 1) ^ (n >> 31));
  }

  struct(s: Struct, depth: number): void {
    if (depth > MAX_DEPTH) throw new ThriftError(`nested deeper than ${MAX_DEPTH}`);
    let last = 0;
    for (const id of [...s.keys()].sort((a, b) => a - b)) {
      if (!Number.isInteger(id) || id < -0x8000 || id > 0x7fff) throw new ThriftError(`field id out of range: ${id}`);
      const v = s.get(id)!;
      const code = v.type === 'bool' ? (v.value ? TRUE : FALSE) : CODES[v.type];
      const delta = id - last;
      if (delta > 0 && delta <= 15) this.byte((delta << 4) | code);
      else {
        this.byte(code);
        this.zigzag32(id, 'i16');
      }
      if (v.type !== 'bool') this.value(v, depth);
      last = id;
    }
    this.byte(STOP);
  }

  value(v: Value, depth: number): void {
    switch (v.type) {
      case 'bool':
        return this.byte(v.value ? 1 : 0);
      case 'i8':
        if (!Number.isInteger(v.value) || v.value < -0x80 || v.value > 0x7f) throw new ThriftError(`i8 out of range: ${v.value}`);
        return this.byte(v.value);
      case 'i16':
      case 'i32':
        return this.zigzag32(v.value, v.type);
      case 'i64':
        if (v.value < -(2n ** 63n) || v.value >= 2n ** 63n) throw new ThriftError(`i64 out of range: ${v.value}`);
        return this.varint64(BigInt.asUintN(64, (v.value << 1n) ^ (v.value >> 63n)));
      case 'double': {
        this.room(8);
        new DataView(this.buf.buffer).setFloat64(this.length, v.value, true);
        this.length += 8;
        return;
      }
      case 'binary':
        this.varint32(v.value.byteLength);
        this.room(v.value.byteLength);
        this.buf.set(v.value, this.length);
        this.length += v.value.byteLength;
        return;
      case 'list': {
        const code = v.element === 'bool' ? BOOL_ELEMENT : CODES[v.element];
        if (v.value.length < 15) this.byte((v.value.length << 4) | code);
        else {
          this.byte(0xf0 | code);
          this.varint32(v.value.length);
        }
        for (const item of v.value) {
          if (item.type !== v.element) throw new ThriftError(`a ${item.type} in a list of ${v.element}`);
          this.value(item, depth + 1);
        }
        return;
      }
      case 'struct':
        return this.struct(v.value, depth + 1);
    }
  }
}
