// Pass 1 of an import: the file's records read and validated a batch at a time, each batch handed
// on in the file's order. A large NDJSON file's lines are validated on threads of their own
// (validationPool.ts), several batches at once, while this thread reads the next and the caller
// writes the last; a small one's, and GeoJSON and CSV records (parsed here by their parsers),
// are validated here.
import type { LoadedBoundaries } from '../boundaries/repository.js';
import { ndjsonBatches, records, type ImportFormat } from './importRecords.js';
import type { Progress } from './progress.js';
import { emptyBatch, validateInto, validateLineBatch, type ValidatedBatch } from './validateRecords.js';
import { ValidationPool } from './validationPool.js';

/** A batch validated: `count` records, the first of them the file's record `first` (0-based). */
export type ValidatedBatchSink = (first: number, count: number, batch: ValidatedBatch) => Promise<void>;

export interface ValidateFileOptions {
  file: string;
  /** The file's size in bytes (whether its lines go to threads). */
  bytes: number;
  format: ImportFormat;
  /** Records before this one are left out (done by an earlier run). */
  from: number;
  /** Records a batch. */
  size: number;
  boundaries: Pick<LoadedBoundaries, 'levels' | 'placeNames' | 'tagger'>;
  /** The key name the import runs as; none: the operators'. */
  partner: string | undefined;
  /** NDJSON files of at least this many bytes are validated on threads (THREADS_FROM_BYTES). */
  threadsFromBytes?: number | undefined;
}

/**
 * NDJSON files smaller than this are validated on the import's thread: each validation thread
 * starts by making its own tagger and place names from a copy of the boundaries (about a second
 * with the national set), more than the threads save on a file of fewer than some 200,000 lines.
 */
const THREADS_FROM_BYTES = 48 * 1024 * 1024;

/** Batches validated at once per thread: one being validated while the one before comes back. */
const IN_FLIGHT_PER_THREAD = 2;

/** Validates the file's records from `options.from` on, handing each batch to `sink` in order; resolves once the last is handed on. */
export async function validateFile(options: ValidateFileOptions, sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
  if (options.format !== 'ndjson') await validateHere(options, options.format, sink, progress);
  else if (options.bytes >= (options.threadsFromBytes ?? THREADS_FROM_BYTES)) await validateLinesOnThreads(options, sink, progress);
  else await validateLinesHere(options, sink, progress);
}

async function validateLinesOnThreads({ file, from, size, boundaries, partner }: ValidateFileOptions, sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
  const pool = new ValidationPool(boundaries, partner);
  const inFlight: { first: number; count: number; validated: Promise<ValidatedBatch> }[] = [];
  try {
    const handOn = async () => {
      const { first, count, validated } = inFlight.shift()!;
      await sink(first, count, await validated);
    };
    let next = from;
    for await (const { lines, ends, bytes } of ndjsonBatches(file, size, from)) {
      progress?.tick(bytes);
      const validated = pool.validate(lines, ends);
      // Handled here: a failure is thrown where it is awaited, in order.
      validated.catch(() => undefined);
      inFlight.push({ first: next, count: ends.length, validated });
      next += ends.length;
      if (inFlight.length >= IN_FLIGHT_PER_THREAD * pool.size) await handOn();
    }
    while (inFlight.length > 0) await handOn();
  } finally {
    await pool.close();
  }
}

async function validateLinesHere({ file, from, size, boundaries, partner }: ValidateFileOptions, sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
  const ctx = { tagger: boundaries.tagger, placeNames: boundaries.placeNames, partner };
  let first = from;
  for await (const { lines, ends, bytes } of ndjsonBatches(file, size, from)) {
    progress?.tick(bytes);
    await sink(first, ends.length, validateLineBatch(lines, ends, ctx));
    first += ends.length;
  }
}

async function validateHere({ file, from, size, boundaries, partner }: ValidateFileOptions, format: 'geojson' | 'csv', sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
  const ctx = { tagger: boundaries.tagger, placeNames: boundaries.placeNames, partner };
  let index = 0;
  let first = from;
  let batch = emptyBatch();
  let count = 0;
  for await (const record of records(file, format)) {
    // Their parsers do not tell the bytes each record took: progress as time, not a share.
    progress?.tick(0);
    if (index++ < from) continue;
    validateInto(batch, count++, record, ctx);
    if (count >= size) {
      await sink(first, count, batch);
      first += count;
      batch = emptyBatch();
      count = 0;
    }
  }
  if (count > 0) await sink(first, count, batch);
}
