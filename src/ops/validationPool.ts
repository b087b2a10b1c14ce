// An import's validation threads. Pass 1 validates every record as the feed validates a post;
// on the import's own thread that bounded reading (some 14 µs a record, one core busy while the
// other wrote the validated files). NDJSON batches go to these threads as bytes, each thread
// with the boundaries' levels and place names of its own, and come back as the ledger's JSON.
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { CompactLevels, Level } from '../boundaries/compactLevels.js';
import type { Place } from '../boundaries/placeNames.js';
import type { LoadedBoundaries } from '../boundaries/repository.js';
import { workerScript } from '../shared/workerScript.js';
import type { ValidatedBatch } from './validateRecords.js';

/** What each thread starts with. */
export interface ValidationWorkerData {
  levels: CompactLevels;
  places: Place[];
  partner: string | undefined;
}

/** A batch of NDJSON lines end to end, line i ending at ends[i] (see ndjsonBatches). */
export interface ValidationRequest {
  id: number;
  lines: Uint8Array;
  ends: Int32Array;
}

/** The batch validated, or the fault that stopped its thread's work (never a bad record: those are rejects). */
export type ValidationReply = { id: number; batch: ValidatedBatch } | { id: number; error: string };

/** Threads at most: past the cores, more threads only share them. */
const MAX_THREADS = 4;

export class ValidationPool {
  private readonly threads: Worker[] = [];
  private readonly waiting = new Map<number, { resolve: (batch: ValidatedBatch) => void; reject: (err: Error) => void }>();
  private nextId = 0;
  private failure: Error | undefined;

  constructor(boundaries: Pick<LoadedBoundaries, 'levels' | 'placeNames'>, partner: string | undefined, threads = Math.min(MAX_THREADS, os.availableParallelism())) {
    const workerData: ValidationWorkerData = { levels: taggingLevels(boundaries.levels), places: boundaries.placeNames.places, partner };
    const script = workerScript('ops/validationWorker');
    for (let i = 0; i < Math.max(1, threads); i++) {
      const thread = new Worker(script, { workerData });
      thread.on('message', (reply: ValidationReply) => this.settle(reply));
      thread.on('error', (err) => this.fail(err));
      thread.on('exit', (code) => this.fail(new Error(`a validation thread ended (exit code ${code})`)));
      this.threads.push(thread);
    }
  }

  /** How many threads validate. */
  get size(): number {
    return this.threads.length;
  }

  /** Validates a batch of lines (ndjsonBatches) on the next thread in turn. */
  validate(lines: Buffer, ends: Int32Array): Promise<ValidatedBatch> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.threads[id % this.threads.length]!.postMessage({ id, lines, ends } satisfies ValidationRequest);
    });
  }

  /** Ends the threads; what they still had is failed. */
  async close(): Promise<void> {
    const threads = this.threads.splice(0);
    this.fail(new Error('the validation threads were closed'));
    await Promise.all(threads.map((t) => t.terminate()));
  }

  private settle(reply: ValidationReply): void {
    const waiting = this.waiting.get(reply.id);
    if (!waiting) return;
    this.waiting.delete(reply.id);
    if ('batch' in reply) waiting.resolve(reply.batch);
    else waiting.reject(new Error(`validating an import's records failed: ${reply.error}`));
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const { reject } of this.waiting.values()) reject(err);
    this.waiting.clear();
  }
}

/** What a Tagger reads of the levels: not the geometries' GeoJSON text (27 MB nationally), copied to every thread for nothing. */
function taggingLevels(levels: CompactLevels): CompactLevels {
  const lean = <P>(level: Level<P>): Level<P> => ({ ...level, geometries: [] });
  return {
    ...(levels.regions && { regions: lean(levels.regions) }),
    ...(levels.provinces && { provinces: lean(levels.provinces) }),
    cities: lean(levels.cities),
    localAreas: lean(levels.localAreas),
  };
}
