// A part's seal: a SHA-256 of the part, kept in the part's own footer. DuckDB writes Parquet pages
// without their optional CRC and zstd frames without a checksum, so a byte flipped on a disk
// decodes as other values, with no error: a report's text, time or pkey changes. The jobs that
// rewrite parts from parts (compaction, reprocess, the purge, a repair's merge) and `verify`
// check the seal first (partCache.ts, withFiles), so damage is named, and never carried into a
// new part or the ledger.
//
// Format note. The seal is one entry of the footer's key_value_metadata (FileMetaData field 5),
// key `flood_archive.sha256`, value the lowercase hex SHA-256 of: the file's bytes before the
// footer (`PAR1`, the row groups, any page indexes), then the footer (FileMetaData in Thrift's
// compact protocol, as thriftCompact.ts encodes it, fields in id order) without that entry. A
// sealed footer is stored in that same encoding, and must be read back byte for byte. Readers of
// Parquet (DuckDB, pyarrow, Athena) ignore keys they do not know. A part written before seals, or
// whose footer could not be sealed (partPublisher.ts), has none: it is taken as it is.
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs/promises';
import { binary, decodeStruct, encodeStruct, list, listField, required, struct, type Struct } from './thriftCompact.js';

export const SEAL_KEY = 'flood_archive.sha256';

const MAGIC = Buffer.from('PAR1');
/** FileMetaData's key_value_metadata, and KeyValue's fields (parquet.thrift). */
const KEY_VALUE_METADATA = 5;
const KeyValue = { key: 1, value: 2 } as const;

/** Parts whose bytes are not the ones sealed: a job stops rather than read them. */
export class DamagedPartsError extends Error {
  constructor(readonly parts: readonly { key: string; reason: string }[]) {
    super(
      `${parts.length === 1 ? 'a part is' : `${parts.length} parts are`} damaged (${parts
        .slice(0, 5)
        .map((p) => `${p.key}: ${p.reason}`)
        .join('; ')}${parts.length > 5 ? '; …' : ''}): restore ${parts.length === 1 ? 'it' : 'them'} from a backup of the store (docs/operations.md, "Damaged parts"), then run this again`,
    );
  }
}

export type SealCheck = { state: 'sealed' } | { state: 'unsealed' } | { state: 'damaged'; reason: string };

/** The part's bytes with its seal in the footer (an older seal replaced). */
export function sealPart(bytes: Buffer): Buffer {
  const { pagesEnd, meta } = footerOf(bytes);
  const { rest } = withoutSeal(meta);
  const unsealed = footerWith(meta, rest);
  const seal: Struct = new Map([
    [KeyValue.key, binary(SEAL_KEY)],
    [KeyValue.value, binary(digest(bytes, pagesEnd, unsealed))],
  ]);
  const footer = footerWith(meta, [...rest, seal]);
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(footer.byteLength, 0);
  MAGIC.copy(tail, 4);
  return Buffer.concat([bytes.subarray(0, pagesEnd), footer, tail]);
}

/** A part's bytes as the check reads them: a few ranges, and the pages streamed into the hash. */
interface PartBytes {
  size: number;
  at(position: number, length: number): Promise<Buffer>;
  /** Feeds bytes [0, end) to the hash. */
  into(hash: Hash, end: number): Promise<void>;
}

/** Whether the part's bytes are the ones sealed (a footer that cannot be read is damage too). */
export function checkSeal(bytes: Buffer): Promise<SealCheck> {
  return check({
    size: bytes.length,
    at: async (position, length) => bytes.subarray(position, position + length),
    into: async (hash, end) => void hash.update(bytes.subarray(0, end)),
  });
}

/** checkSeal of a file, its pages streamed (a part is never held whole in memory for it). */
export async function checkSealOf(file: string): Promise<SealCheck> {
  const handle = await fs.open(file, 'r');
  try {
    const { size } = await handle.stat();
    return await check({
      size,
      at: async (position, length) => {
        const out = Buffer.alloc(length);
        const { bytesRead } = await handle.read(out, 0, length, position);
        return out.subarray(0, bytesRead);
      },
      into: async (hash, end) => {
        for await (const chunk of handle.createReadStream({ start: 0, end: end - 1, autoClose: false })) hash.update(chunk as Buffer);
      },
    });
  } finally {
    await handle.close();
  }
}

async function check(part: PartBytes): Promise<SealCheck> {
  let footer, meta, seal, rest, pagesEnd;
  try {
    if (part.size < 12 || !(await part.at(0, 4)).equals(MAGIC)) throw new Error('not a Parquet file (no PAR1 at its start and end)');
    const tail = await part.at(part.size - 8, 8);
    if (!tail.subarray(4).equals(MAGIC)) throw new Error('not a Parquet file (no PAR1 at its start and end)');
    const length = tail.readUInt32LE(0);
    if (length > part.size - 12) throw new Error(`a Parquet footer of ${length} bytes in a file of ${part.size}`);
    pagesEnd = part.size - 8 - length;
    footer = await part.at(pagesEnd, length);
    meta = decodeFooter(footer);
    ({ seal, rest } = withoutSeal(meta));
  } catch (err) {
    return { state: 'damaged', reason: (err as Error).message };
  }
  if (seal === undefined) return { state: 'unsealed' };
  // A sealed footer is written in one encoding (sealPart's): a change that decodes to the same
  // values (a varint padded, a field's type code swapped for its twin) is damage too.
  if (!Buffer.from(encodeStruct(inIdOrder(meta))).equals(footer)) return { state: 'damaged', reason: 'its Parquet footer is not as it was written' };
  const hash = createHash('sha256');
  await part.into(hash, pagesEnd);
  const found = hash.update(footerWith(meta, rest)).digest('hex');
  return found === seal ? { state: 'sealed' } : { state: 'damaged', reason: `its SHA-256 is ${found.slice(0, 16)}…, sealed as ${seal.slice(0, 16)}…` };
}

function decodeFooter(footer: Uint8Array): Struct {
  try {
    return decodeStruct(footer);
  } catch (err) {
    throw new Error(`its Parquet footer is unreadable (${(err as Error).message})`, { cause: err });
  }
}

function footerOf(bytes: Buffer): { pagesEnd: number; meta: Struct } {
  if (bytes.length < 12 || !bytes.subarray(0, 4).equals(MAGIC) || !bytes.subarray(bytes.length - 4).equals(MAGIC)) throw new Error('not a Parquet file (no PAR1 at its start and end)');
  const length = bytes.readUInt32LE(bytes.length - 8);
  if (length > bytes.length - 12) throw new Error(`a Parquet footer of ${length} bytes in a file of ${bytes.length}`);
  const pagesEnd = bytes.length - 8 - length;
  return { pagesEnd, meta: decodeFooter(bytes.subarray(pagesEnd, bytes.length - 8)) };
}

function withoutSeal(meta: Struct): { seal: string | undefined; rest: Struct[] } {
  let seal: string | undefined;
  const rest: Struct[] = [];
  for (const entry of listField(meta, KEY_VALUE_METADATA, 'struct') ?? []) {
    if (Buffer.from(required(entry, KeyValue.key, 'binary')).toString('utf8') !== SEAL_KEY) rest.push(entry);
    else seal = Buffer.from(required(entry, KeyValue.value, 'binary')).toString('utf8');
  }
  return { seal, rest };
}

/** The footer's bytes with `entries` as its key-value metadata (none: the field left out). */
function footerWith(meta: Struct, entries: readonly Struct[]): Uint8Array {
  const out: Struct = new Map(meta);
  if (entries.length > 0) out.set(KEY_VALUE_METADATA, list('struct', entries.map(struct)));
  else out.delete(KEY_VALUE_METADATA);
  return encodeStruct(inIdOrder(out));
}

/** Fields in the order of their ids, as Thrift writers put them (field 5 may be new in a footer). */
const inIdOrder = (s: Struct): Struct => new Map([...s].sort(([a], [b]) => a - b));

function digest(bytes: Buffer, pagesEnd: number, footer: Uint8Array): string {
  return createHash('sha256').update(bytes.subarray(0, pagesEnd)).update(footer).digest('hex');
}
