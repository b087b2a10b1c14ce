// Write-ahead journal of the file store's new objects.
//
// A new object becomes durable when its key and bytes are appended to a journal segment
// and the segment is flushed: one wait for the disk shared by every object that arrives
// while the previous flush runs (group commit), instead of one flush of each new file and
// of its directory. The files themselves reach the disk later: a checkpoint flushes those
// still present and then retires the segment, once the kernel has written most of them
// back on its own and most (pending markers) have been deleted.
//
// After a power loss (a segment written in an earlier boot), every entry of the segments
// left is written again where its file is missing or was torn. Files deleted shortly
// before the loss can come back that way; deletes on this store were never durable, and
// every user of create-if-absent reads a revived object as a repeat. After a process crash
// (same boot) the page cache kept everything: its segments are only checkpointed.
import { closeSync, existsSync, fdatasync, fsync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import { mapLimit } from '../ops/concurrency.js';

const fdatasyncFd = promisify(fdatasync);
const fsyncFd = promisify(fsync);

export interface JournalOptions {
  /** How long a closed segment waits before its checkpoint. */
  checkpointAfterMs: number;
  /** A segment is closed after this long (or when the process stops). */
  rotateAfterMs: number;
  /** Identifies this boot of the machine; a segment from another one may have lost files. */
  bootId: string;
}

export const DEFAULT_JOURNAL_OPTIONS: Omit<JournalOptions, 'bootId'> = { checkpointAfterMs: 45_000, rotateAfterMs: 5_000 };

interface OpenSegment {
  name: string;
  fd: number;
  openedAt: number;
  /** The flush of the segment's directory entry, which every commit to it waits for. */
  named?: Promise<void>;
  /** Commits writing or flushing it; its descriptor is closed once none is left. */
  inFlight: number;
  closing: boolean;
  /** Where the next entry goes. */
  position: number;
  /** Bytes allocated (zero-filled) so far. */
  allocated: number;
}

interface ClosedSegment {
  name: string;
  closedAt: number;
}

/** One journal entry as it was appended. */
export interface JournalEntry {
  key: string;
  body: Buffer;
  /** When it was appended (ms). A later modification of its file is newer than this. */
  at: number;
}

/** Journals open in this process: a segment named with this pid is an orphan only if its journal is not here. */
const liveInstances = new Set<string>();

export class FileJournal {
  private readonly instance = randomBytes(4).toString('hex');
  private seq = 0;
  private current: OpenSegment | undefined;
  private readonly closed: ClosedSegment[] = [];
  private queued: Buffer[] = [];
  /** The commit under way, and the one callers arriving meanwhile share. */
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checkpointing: Promise<void> | undefined;
  /** Copies noted by this process, in segments not retired yet. */
  private readonly covered = new Set<string>();
  /** Commits so far (one flush of the segment each): the group commit, made visible. */
  commits = 0;

  constructor(
    private readonly dir: string,
    private readonly fileOf: (key: string) => string,
    private readonly options: JournalOptions,
  ) {}

  /** Appends an entry; resolves once it is on disk. */
  append(key: string, body: Buffer): Promise<void> {
    this.enqueue(key, body);
    return this.flush();
  }

  /** Appends an entry (a copy) that becomes durable with the next flush. */
  note(key: string, body: Buffer): void {
    this.enqueue(key, body);
    this.covered.add(key);
    // Flushed by the next commit, or by the timer within a second.
    this.startTimer();
  }

  private enqueue(key: string, body: Buffer): void {
    const header = Buffer.from(`${JSON.stringify({ k: key, n: body.length, c: crc32(body), t: Date.now() })}\n`);
    this.queued.push(header, body, NEWLINE);
  }

  /** Whether this process noted the copy (in a segment not yet retired): a flush makes it durable. */
  covers(key: string): boolean {
    return this.covered.has(key);
  }

  /**
   * Makes every entry appended so far durable: the caller's bytes go with the next commit to
   * start, never one already running (which may predate them); it takes everything appended
   * meanwhile (group commit). One commit at a time: overlapping two or three was measured here
   * to accept fewer reports a second, each flush waiting longer than the batch it saves.
   */
  flush(): Promise<void> {
    if (!this.running) {
      this.running = this.commit().finally(() => this.afterCommit());
      return this.running;
    }
    this.next ??= this.running.catch(() => undefined).then(() => this.commit());
    return this.next;
  }

  private afterCommit(): void {
    const next = this.next;
    this.next = undefined;
    this.running = next?.finally(() => this.afterCommit());
  }

  private commit(): Promise<void> {
    // Nothing new: every earlier commit has finished (they run one at a time).
    if (this.queued.length === 0) return Promise.resolve();
    const data = Buffer.concat(this.queued);
    this.queued = [];
    const segment = this.segmentFor();
    if (segment.position + data.length > segment.allocated) {
      // Zero-filled ahead: a flush of bytes written over allocated space changes no metadata,
      // so most commits need no commit of the file system's own journal. Readers stop at the zeros.
      const size = Math.max(segment.position + data.length, segment.allocated + ALLOCATE_BYTES);
      writeAt(segment.fd, Buffer.alloc(size - segment.allocated), segment.allocated);
      segment.allocated = size;
    }
    writeAt(segment.fd, data, segment.position);
    segment.position += data.length;
    segment.inFlight += 1;
    // A new segment's name must be durable before anything in it counts.
    segment.named ??= fsyncDir(this.dir);
    const done = Promise.all([segment.named, fdatasyncFd(segment.fd)])
      .then(() => {
        this.commits += 1;
      })
      .finally(() => {
        segment.inFlight -= 1;
        if (segment.closing && segment.inFlight === 0) closeSync(segment.fd);
      });
    return done;
  }

  /** The segment to append to: a new one once the current one is old. */
  private segmentFor(): OpenSegment {
    if (this.current && (Date.now() - this.current.openedAt >= this.options.rotateAfterMs || this.current.position >= SEGMENT_BYTES)) {
      this.closeCurrent();
    }
    if (!this.current) {
      liveInstances.add(this.instance);
      this.startTimer();
      const name = `${this.options.bootId}_${process.pid}_${this.instance}_${String(++this.seq).padStart(8, '0')}${SEGMENT_SUFFIX}`;
      mkdirSync(this.dir, { recursive: true });
      const fd = openSync(path.join(this.dir, name), 'wx', 0o644);
      this.current = { name, fd, openedAt: Date.now(), inFlight: 0, closing: false, position: 0, allocated: 0 };
    }
    return this.current;
  }

  private closeCurrent(): void {
    const segment = this.current;
    if (!segment) return;
    // Commits still flushing it close the descriptor when the last one is done.
    segment.closing = true;
    if (segment.inFlight === 0) closeSync(segment.fd);
    this.closed.push({ name: segment.name, closedAt: Date.now() });
    this.current = undefined;
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.checkpoint(false).catch(() => undefined);
    }, Math.max(50, Math.min(this.options.rotateAfterMs, 1000)));
    this.timer.unref();
  }

  /**
   * Closes an idle segment, and retires closed segments once they are old enough
   * (all of them when `all`): their files are flushed, then the segment is deleted.
   */
  checkpoint(all: boolean): Promise<void> {
    // A tick while one runs has nothing to add; a full checkpoint runs after it.
    if (this.checkpointing && !all) return this.checkpointing;
    const run = (this.checkpointing ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => this.runCheckpoint(all))
      .finally(() => {
        if (this.checkpointing === run) this.checkpointing = undefined;
      });
    this.checkpointing = run;
    return run;
  }

  private async runCheckpoint(all: boolean): Promise<void> {
    if (all || this.queued.length > 0) await this.flush();
    if (this.current && (all || Date.now() - this.current.openedAt >= this.options.rotateAfterMs)) this.closeCurrent();
    const cutoff = all ? Infinity : Date.now() - this.options.checkpointAfterMs;
    while (this.closed.length > 0 && this.closed[0]!.closedAt <= cutoff) {
      await this.retire(this.closed[0]!.name, false);
      this.closed.shift();
    }
    if (!this.current && this.closed.length === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Checkpoints every segment and stops the timer: nothing is left to replay. */
  async close(): Promise<void> {
    await this.checkpoint(true);
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    liveInstances.delete(this.instance);
  }

  /**
   * Retires the segments other processes left: replayed when written in another boot,
   * only checkpointed when their process died in this one. Segments of live processes stay.
   */
  async recoverOrphans(): Promise<number> {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (err) {
      if (isCode(err, 'ENOENT')) return 0;
      throw err;
    }
    let recovered = 0;
    for (const name of names.filter((n) => n.endsWith(SEGMENT_SUFFIX)).sort()) {
      const owner = ownerOf(name);
      if (owner.instance === this.instance) continue;
      const otherBoot = owner.bootId !== this.options.bootId;
      // Our pid with a journal not open here: an earlier process that had the same pid (a container restarted).
      const live = owner.pid === process.pid ? liveInstances.has(owner.instance) : isAlive(owner.pid);
      if (!otherBoot && live) continue;
      await this.retire(name, otherBoot);
      recovered += 1;
    }
    return recovered;
  }

  /**
   * Makes a segment's files durable, then deletes it. With `replay`, a file missing or torn
   * (different bytes, not modified since its entry) is first written again from its entry.
   */
  private async retire(name: string, replay: boolean): Promise<void> {
    const segment = path.join(this.dir, name);
    let data: Buffer;
    try {
      data = readFileSync(segment);
    } catch (err) {
      // Retired meanwhile by another process recovering the same orphan.
      if (isCode(err, 'ENOENT')) return;
      throw err;
    }
    const files = new Set<string>();
    for (const entry of readEntries(data)) {
      const file = this.fileOf(entry.key);
      if (replay) restore(file, entry);
      files.add(file);
      // A key journaled again later is found uncovered and flushed on its own: slower, still right.
      this.covered.delete(entry.key);
    }
    for (const dir of await fsyncFiles(files, 2)) await fsyncDir(dir);
    try {
      unlinkSync(segment);
    } catch (err) {
      if (!isCode(err, 'ENOENT')) throw err;
    }
  }
}

/**
 * Flushes the files that exist (at most `concurrency` at once); those deleted since (cleared
 * markers) need nothing. Returns the directories of the files flushed, whose entries the
 * caller flushes next.
 */
export async function fsyncFiles(files: Iterable<string>, concurrency: number): Promise<Set<string>> {
  const dirs = new Set<string>();
  await mapLimit([...files], concurrency, async (file) => {
    // Checked first, as most are gone, and a failed open costs an exception.
    if (!existsSync(file)) return;
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch (err) {
      if (isCode(err, 'ENOENT')) return;
      throw err;
    }
    try {
      await fsyncFd(fd);
    } finally {
      closeSync(fd);
    }
    dirs.add(path.dirname(file));
  });
  return dirs;
}

const SEGMENT_SUFFIX = '.wal';
/** Segments grow by this much at a time (about a thousand reports). */
const ALLOCATE_BYTES = 1 << 20;
/** A segment this full is closed even before it is old. */
const SEGMENT_BYTES = 64 << 20;

function writeAt(fd: number, data: Buffer, position: number): void {
  for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off, position + off);
}
const NEWLINE = Buffer.from('\n');

/** The entries of a segment, up to its first torn or corrupt one (a crash during an append). */
export function* readEntries(data: Buffer): Iterable<JournalEntry> {
  let off = 0;
  while (off < data.length) {
    const eol = data.indexOf(0x0a, off);
    if (eol < 0) return;
    let header: { k?: unknown; n?: unknown; c?: unknown; t?: unknown };
    try {
      header = JSON.parse(data.toString('utf8', off, eol)) as typeof header;
    } catch {
      return;
    }
    const { k, n, c, t } = header;
    if (typeof k !== 'string' || typeof n !== 'number' || typeof c !== 'number' || typeof t !== 'number') return;
    const start = eol + 1;
    const end = start + n;
    if (end + 1 > data.length || data[end] !== 0x0a) return;
    const body = data.subarray(start, end);
    if (crc32(body) !== c) return;
    yield { key: k, body, at: t };
    off = end + 1;
  }
}

/** Writes the entry's bytes where its file is missing, or torn and not modified since. */
function restore(file: string, entry: JournalEntry): void {
  let current: Buffer | undefined;
  let modifiedMs = 0;
  try {
    current = readFileSync(file);
    modifiedMs = statSync(file).mtimeMs;
  } catch (err) {
    if (!isCode(err, 'ENOENT')) throw err;
  }
  if (current && (current.equals(entry.body) || modifiedMs > entry.at)) return;
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    writeAt(fd, entry.body, 0);
  } finally {
    closeSync(fd);
  }
  // Flushed by the checkpoint that follows; the segment is deleted only after it.
  renameSync(tmp, file);
}

function ownerOf(name: string): { bootId: string; pid: number; instance: string } {
  const [bootId = '', pid = '0', instance = ''] = name.slice(0, -SEGMENT_SUFFIX.length).split('_');
  return { bootId, pid: Number(pid), instance };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return isCode(err, 'EPERM');
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fd = openSync(dir, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/** This boot of the machine: the kernel's boot id, or where there is none, the boot time. */
export function currentBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return `t${Math.round((Date.now() - os.uptime() * 1000) / 60_000)}`;
  }
}

function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}
