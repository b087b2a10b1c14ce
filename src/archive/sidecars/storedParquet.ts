// The answer-form Parquet section of a ready text, opened for a Parquet answer to copy its row
// groups: only when the sidecar has one and every report it holds lies inside the window.
import type { FileHandle } from 'node:fs/promises';
import { keepsAllTimes } from './itemFilter.js';
import { openReady } from './readyIndex.js';

/** A byte range of an open sidecar holding a whole Parquet file. */
export interface StoredParquet {
  handle: FileHandle;
  offset: number;
  length: number;
}

/**
 * The sidecar's Parquet section, open (close its handle when done), if every report it holds
 * was created within [startMs, endMs]; undefined otherwise (nothing left open).
 */
export async function openStoredParquet(file: string, startMs: number, endMs: number): Promise<StoredParquet | undefined> {
  const { handle, ready } = await openReady(file);
  const { parquet, hours } = ready.index;
  if (!hours.every((h) => keepsAllTimes(h, { startMs, endMs }))) {
    await handle.close().catch(() => undefined);
    return undefined;
  }
  return { handle, offset: ready.base + parquet[0], length: parquet[1] - parquet[0] };
}
