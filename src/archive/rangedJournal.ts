// The journal of a directory of ranged copies (`journal.json` in it): for each copy, its file
// and what it holds (rangedCopy.ts). A restarted process reads it to adopt the copies. It is
// written whole or not at all, a JOURNAL_DELAY_MS after a change at most, never on an
// answer's path: one write per ranged read slowed a cold year on S3 by a tenth. Each state
// names only bytes already written; a copy's file name is its own (a random part), so an entry
// outlived by its file (evicted, then made anew) names no file, never another copy's. A journal
// written before the machine last booted is not trusted: bytes written shortly before a power
// loss may not have reached the disk.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CopyState } from './rangedCopy.js';

export const JOURNAL = 'journal.json';
/** How long after a change the journal is written: a restart within it fetches those ranges again. */
const JOURNAL_DELAY_MS = 1_000;

/** A copy as journaled: its file's name in the directory, and its state. */
export interface JournaledCopy {
  file: string;
  state: CopyState;
}

/** The copies `dir`'s journal names, by cache name; none when it has no journal to trust. */
export async function readJournal(dir: string): Promise<Map<string, JournaledCopy>> {
  const file = path.join(dir, JOURNAL);
  try {
    const [text, stat] = await Promise.all([fs.readFile(file, 'utf8'), fs.stat(file)]);
    if (stat.mtimeMs < Date.now() - os.uptime() * 1000) return new Map();
    const journal = JSON.parse(text) as { v?: unknown; copies?: Record<string, JournaledCopy> };
    if (journal.v !== 1 || typeof journal.copies !== 'object' || journal.copies === null) return new Map();
    return new Map(Object.entries(journal.copies).filter(([, c]) => typeof c.file === 'string' && !c.file.includes('/') && Array.isArray(c.state?.present)));
  } catch {
    return new Map();
  }
}

/** Writes `dir`'s journal from `copies()` a little after each change, and at once on `flush`. */
export class JournalWriter {
  private timer: NodeJS.Timeout | undefined;
  private dirty = false;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly dir: string,
    private readonly copies: () => Map<string, JournaledCopy>,
  ) {}

  /** A copy was made, grew or went: the journal is written soon. */
  changed(): void {
    this.dirty = true;
    if (this.timer) return;
    this.timer = setTimeout(() => void this.flush(), JOURNAL_DELAY_MS);
    // A process may end meanwhile: what it fetched last is fetched again, that is all.
    this.timer.unref();
  }

  /** Writes the journal now if anything changed (after any write under way). A failed write fails nothing: the journal before names less. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.dirty) return this.writing;
    this.dirty = false;
    this.writing = this.writing.then(async () => {
      const file = path.join(this.dir, JOURNAL);
      const tmp = `${file}.tmp`;
      try {
        await fs.writeFile(tmp, JSON.stringify({ v: 1, copies: Object.fromEntries(this.copies()) }));
        await fs.rename(tmp, file);
      } catch {
        await fs.rm(tmp, { force: true }).catch(() => undefined);
      }
    });
    return this.writing;
  }
}
