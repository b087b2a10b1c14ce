// Buffers that ready texts are read into on their way to a client, reused once the consumer
// says their bytes are written (`releaseChunk`, exported as `pieceWritten`). A fresh
// multi-megabyte buffer costs a page fault per 4 KB the first time it is filled (about 1 ms per
// MB here, more than the copy from the page cache): a new process paid that for every byte of
// its first answers, and a year's text answer made a gigabyte of garbage. A few chunks, written
// one after another, carry any answer instead; they are allocated and touched when this module
// loads, before the server listens.
/** Bytes per chunk: large enough that a year is a few thousand writes, small enough to keep a few. */
export const CHUNK_BYTES = 512 * 1024;
/** Chunks kept for reuse (a response holds one or two in flight; the rest serve concurrent answers). */
const KEEP = 8;
/** Chunks allocated and touched at start-up. */
const PREPARED = 4;

const free: ArrayBuffer[] = [];
/**
 * Chunks handed out and not yet given back: only these are taken back, once each. Weak: a chunk
 * its reader never gives back (an export written to a file, a write that failed) is garbage
 * like any other buffer.
 */
const lent = new WeakSet<ArrayBuffer>();

for (let i = 0; i < PREPARED; i++) free.push(new Uint8Array(CHUNK_BYTES).fill(1).buffer);

/** A chunk of CHUNK_BYTES to read into; it comes back through `releaseChunk` once it is written. */
export function takeChunk(): Buffer {
  const buffer = free.pop() ?? new ArrayBuffer(CHUNK_BYTES);
  lent.add(buffer);
  return Buffer.from(buffer, 0, CHUNK_BYTES);
}

/**
 * Gives a chunk (or a view of one) back once nothing reads it any more: the socket or encoder
 * it was written to has taken its bytes. A piece that is not on loan is left alone.
 */
export function releaseChunk(piece: Uint8Array): void {
  const buffer = piece.buffer as ArrayBuffer;
  if (!lent.delete(buffer)) return;
  if (free.length < KEEP) free.push(buffer);
}
