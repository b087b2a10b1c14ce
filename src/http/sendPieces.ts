// Sends an answer (text or Arrow) piece by piece, waiting for the client whenever it falls
// behind. A gzip answer joins the stored sections' deflate data as they are, and deflates only
// what is not stored so (headers, separators, hours built by DuckDB): on two cores that is the
// difference between copying bytes and compressing them again.
import type { Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import type { ServerResponse } from 'node:http';
import { GzipJoin, StoredSection } from '../archive/sidecars/index.js';
import { plainPieces, type Piece } from './archiveBody.js';
import { markCutShort } from './answerStart.js';
import { encoder, type Encoding } from './encoding.js';

/**
 * Bytes handed to the client's connection at once, at most: an hour of a busy day is megabytes,
 * and a client reading slowly then shows its progress write by write (sendStall.ts closes only a
 * connection none of whose writes completes for a while).
 */
const WRITE_AT_MOST = 256 * 1024;
/** Plain bytes of plain text deflated at once (each block is deflated on its own). */
const DEFLATE_BLOCK = 256 * 1024;
/** Plain bytes sent stored rather than deflated: separators, an envelope's ends. */
const STORED_AT_MOST = 1024;
/** The level of what is deflated as it is sent: as the streaming encoder's. */
const GZIP_LEVEL = 5;

/**
 * Sends the pieces in `encoding`. A client that hangs up stops the reading (the pieces' source
 * is closed) and fails the request as a pipeline would.
 */
export async function sendPieces(pieces: AsyncIterable<Piece>, encoding: Encoding, res: ServerResponse): Promise<void> {
  if (encoding === 'gzip') return sendJoined(pieces, res);
  const e = encoder(encoding);
  const target: Writable = e ?? res;
  // Listened to as it is created: a client may hang up while the next piece is still being
  // read (a query of many parts), and a rejection nobody awaits yet would stop the process.
  let pipeError: Error | undefined;
  const piped = e ? pipeline(e, res).catch((err: Error) => void (pipeError = err)) : undefined;
  try {
    for await (const piece of plainPieces(pieces)) {
      const bytes = typeof piece === 'string' && piece.length > WRITE_AT_MOST ? Buffer.from(piece) : piece;
      for (const slice of slices(bytes)) {
        if (pipeError || target.destroyed || target.writableEnded) throw pipeError ?? new Error('the client closed the connection');
        if (!target.write(slice)) await drained(target);
      }
    }
    target.end();
    if (piped) await piped;
    else await finished(res);
    if (pipeError) throw pipeError;
  } catch (err) {
    // The client still there: the pieces failed (a stored section unreadable), the server's
    // fault, not a hang-up (the opening is sent before any section: it is cut short).
    if (!res.destroyed && err !== pipeError) markCutShort(res);
    target.destroy(err as Error);
    await piped;
    throw err;
  }
}

/** A gzip answer as one gzip member: stored deflate data joined, the rest deflated a block at a time. */
async function sendJoined(pieces: AsyncIterable<Piece>, res: ServerResponse): Promise<void> {
  const join = new GzipJoin();
  let plain: Uint8Array[] = [];
  let plainBytes = 0;
  const write = async (chunks: Buffer[]) => {
    for (const slice of chunks.flatMap(slices)) {
      if (res.destroyed || res.writableEnded) throw new Error('the client closed the connection');
      if (!res.write(slice)) await drained(res);
    }
  };
  const flushPlain = async () => {
    if (plainBytes === 0) return;
    const block = Buffer.concat(plain);
    plain = [];
    plainBytes = 0;
    await write(block.byteLength <= STORED_AT_MOST ? join.stored(block) : await join.plain(block, GZIP_LEVEL));
  };
  try {
    for await (const piece of pieces) {
      const deflated = piece instanceof StoredSection ? piece.deflated() : undefined;
      if (deflated) {
        await flushPlain();
        await write(join.joined(deflated));
        continue;
      }
      const bytes = piece instanceof StoredSection ? piece.plain() : typeof piece === 'string' ? Buffer.from(piece) : piece;
      plain.push(bytes);
      plainBytes += bytes.byteLength;
      if (plainBytes >= DEFLATE_BLOCK) await flushPlain();
    }
    await flushPlain();
    await write(join.end());
    res.end();
    await finished(res);
  } catch (err) {
    if (!res.destroyed) markCutShort(res);
    res.destroy(err as Error);
    throw err;
  }
}

/** A piece in writes of at most WRITE_AT_MOST bytes (views of it, not copies). */
function slices<T extends string | Uint8Array>(piece: T): T[] {
  if (typeof piece === 'string' || piece.byteLength <= WRITE_AT_MOST) return [piece];
  const out: T[] = [];
  for (let at = 0; at < piece.byteLength; at += WRITE_AT_MOST) out.push(piece.subarray(at, at + WRITE_AT_MOST) as T);
  return out;
}

/** Resolves when `w` wants more, rejects when it closes or fails first. */
function drained(w: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    if (w.destroyed) return reject(new Error('the client closed the connection'));
    if (!w.writableNeedDrain) return resolve();
    const done = (err?: Error) => {
      w.off('drain', onDrain);
      w.off('close', onClose);
      w.off('error', done);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new Error('the client closed the connection'));
    w.on('drain', onDrain);
    w.on('close', onClose);
    w.on('error', done);
  });
}
