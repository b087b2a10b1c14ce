// Pass 1 of an import: the file's records read and validated a batch at a time, each batch handed
// on in the file's order. NDJSON lines are validated on threads of their own (validationPool.ts),
// several batches at once, while this thread reads the next and the caller writes the last;
// GeoJSON and CSV records, parsed here by their parsers, are validated here.
import type { LoadedBoundaries } from '../boundaries/repository.js';
import { ndjsonBatches, records, type ImportFormat } from './importRecords.js';
import type { Progress } from './progress.js';
import { emptyBatch, validateInto, type ValidatedBatch } from './validateRecords.js';
import { ValidationPool } from './validationPool.js';

/** A batch validated: `count` records, the first of them the file's record `first` (0-based). */
export type ValidatedBatchSink = (first: number, count: number, batch: ValidatedBatch) => Promise<void>;

export interface ValidateFileOptions {
  file: string;
  format: ImportFormat;
  /** Records before this one are left out (done by an earlier run). */
  from: number;
  /** Records a batch. */
  size: number;
  boundaries: Pick<LoadedBoundaries, 'levels' | 'placeNames' | 'tagger'>;
  /** The key name the import runs as; none: the operators'. */
  partner: string | undefined;
}

/** Batches validated at once per thread: one being validated while the one before comes back. */
const IN_FLIGHT_PER_THREAD = 2;

/** Validates the file's records from `options.from` on, handing each batch to `sink` in order; resolves once the last is handed on. */
export async function validateFile(options: ValidateFileOptions, sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
  if (options.format === 'ndjson') await validateLines(options, sink, progress);
  else await validateHere(options, options.format, sink);
}

async function validateLines({ file, from, size, boundaries, partner }: ValidateFileOptions, sink: ValidatedBatchSink, progress?: Progress): Promise<void> {
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

async function validateHere({ file, from, size, boundaries, partner }: ValidateFileOptions, format: 'geojson' | 'csv', sink: ValidatedBatchSink): Promise<void> {
  const ctx = { tagger: boundaries.tagger, placeNames: boundaries.placeNames, partner };
  let index = 0;
  let first = from;
  let batch = emptyBatch();
  let count = 0;
  for await (const record of records(file, format)) {
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
