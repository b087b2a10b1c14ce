// A ready text's index line, read from a local file (cached: a window over a year reads
// hundreds) or from the store's first bytes (compaction, to know whether one needs rewriting).
// A purge replaces a part and its sidecar under the same key, never in place: a file's inode,
// size and mtime say which version of it an index belongs to.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import type { ObjectStore } from '../../store/objectStore.js';
import { parseIndex, type ReadyIndex } from './readyFormat.js';

/** A sidecar file's index, and which version of the file it was read from. */
export interface ReadyFile {
  file: string;
  /** inode, size and mtime: a purge rewrites a part and its sidecar under the same key. */
  version: string;
  /** Where the body starts (the index line's length). */
  base: number;
  index: ReadyIndex;
}

/**
 * Indexes read lately, by file version: one file is read under many names (a local store's
 * files are pinned under a name per answer), and a version is one file's bytes.
 */
const indexes = new Map<string, ReadyFile>();
const MAX_INDEXES = 20_000;

const versionOf = (st: { dev: number; ino: number; size: number; mtimeMs: number }) => `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;

/** A sidecar's index (its first line); cached, as a window over a year reads hundreds. */
export function readReadyIndex(file: string): ReadyFile {
  const version = versionOf(statSync(file));
  const known = indexes.get(version);
  if (known) return known.file === file ? known : { ...known, file };
  const fd = openSync(file, 'r');
  try {
    const read = readyFileOf(fd, file);
    // Replaced between the stat and the open: the newer version's index, not kept under the older's name.
    if (read.version !== version) return read;
    if (indexes.size >= MAX_INDEXES) indexes.delete(indexes.keys().next().value!);
    indexes.set(version, read);
    return read;
  } finally {
    closeSync(fd);
  }
}

function readyFileOf(fd: number, file: string): ReadyFile {
  const version = versionOf(fstatSync(fd));
  let buf = Buffer.allocUnsafe(16 * 1024);
  let n = 0;
  for (;;) {
    const got = readSync(fd, buf, n, buf.length - n, n);
    n += got;
    const eol = buf.subarray(0, n).indexOf(10);
    if (eol >= 0) {
      const index = parseIndex(buf.subarray(0, eol).toString('utf8'));
      if (!index) throw new Error(`unknown ready-text version in ${file}`);
      return { file, version, base: eol + 1, index };
    }
    if (got === 0) throw new Error(`ready texts without an index: ${file}`);
    if (n === buf.length) buf = Buffer.concat([buf, Buffer.allocUnsafe(buf.length)]);
  }
}

/**
 * A sidecar opened for reading later: the handle keeps this version of it readable (a purge
 * replaces the file, never changes it in place), and the index is the one of that version.
 */
export async function openReady(file: string): Promise<{ handle: FileHandle; ready: ReadyFile }> {
  const handle = await fs.open(file, 'r');
  try {
    return { handle, ready: current(handle.fd, readReadyIndex(file)) };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** The sidecar open as `fd` as it is now: `ready` if unchanged, else its new index (a purge rewrote it meanwhile). */
export function current(fd: number, ready: ReadyFile): ReadyFile {
  return versionOf(fstatSync(fd)) === ready.version ? ready : readyFileOf(fd, ready.file);
}

/** The index of a stored sidecar, read from its first bytes alone; undefined when there is none (or none this version reads). */
export async function storedIndex(store: ObjectStore, key: string): Promise<ReadyIndex | undefined> {
  for (let length = 64 * 1024; ; length *= 4) {
    const head = (await store.getRange(key, 0, length))?.body;
    if (!head) return undefined;
    const eol = head.indexOf(10);
    if (eol < 0 && head.length === length) continue;
    try {
      return parseIndex(head.subarray(0, eol).toString('utf8'));
    } catch {
      return undefined;
    }
  }
}
