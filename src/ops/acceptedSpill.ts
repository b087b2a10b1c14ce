// What the ledger accepted over a window, read from it once and written to a file per block of
// days, so verify holds one block's pkeys at a time (a year held whole took 1.7 GB) and reads the
// ledger once whatever the window: on S3 a read of the ledger GETs every key written since the
// window began, which after an import of years of history is every key, once per block.
//
// Layout: a folder `verify/<run>/` under the temp dir it is given (verify's: DATA_DIR/tmp, kept by the
// leftover sweep for a day), `<block>.txt` per block holding its reports, a line each:
// `0` or `1` (pending), the UTC day created (days since the epoch), a comma, the pkey (whose
// characters are [a-z0-9._-]: layout.ts). The folder is the run's own and removed with it.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { AcceptedReport } from '../ledger/ledger.js';
import { DAY_MS } from '../store/layout.js';

/** An accepted report as verify compares it: the UTC day it was created, whether it waits to be archived. */
export interface AcceptedEntry {
  day: string;
  pending: boolean;
}

/** Lines held before they are appended to their blocks' files. */
const FLUSH_LINES = 20_000;

export class AcceptedSpill {
  private constructor(
    private readonly dir: string,
    private readonly stored: ReadonlySet<number>,
    /** When the earliest report read was created; undefined when there was none. */
    readonly earliestMs: number | undefined,
  ) {}

  /** Writes the pages' reports to their blocks' files (`blockOf` of a report's creation time). */
  static async write(pages: AsyncIterable<AcceptedReport[]>, blockOf: (createdMs: number) => number, tmpDir: string): Promise<AcceptedSpill> {
    const dir = path.join(tmpDir, 'verify', randomUUID());
    await fs.mkdir(dir, { recursive: true });
    try {
      const stored = new Set<number>();
      let held = new Map<number, string[]>();
      let lines = 0;
      let earliestMs: number | undefined;
      const flush = async () => {
        const writing = held;
        held = new Map();
        lines = 0;
        for (const [block, text] of writing) await fs.appendFile(fileOf(dir, block), text.join(''));
      };
      for await (const page of pages) {
        for (const { pkey, createdMs, pending } of page) {
          if (earliestMs === undefined || createdMs < earliestMs) earliestMs = createdMs;
          const block = blockOf(createdMs);
          stored.add(block);
          const text = held.get(block) ?? held.set(block, []).get(block)!;
          text.push(`${pending ? 1 : 0}${Math.floor(createdMs / DAY_MS)},${pkey}\n`);
        }
        if ((lines += page.length) >= FLUSH_LINES) await flush();
      }
      await flush();
      return new AcceptedSpill(dir, stored, earliestMs);
    } catch (err) {
      await fs.rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** The reports of one block, by pkey (a pkey read twice is one report). */
  async block(block: number): Promise<Map<string, AcceptedEntry>> {
    const accepted = new Map<string, AcceptedEntry>();
    if (!this.stored.has(block)) return accepted;
    const days = new Map<string, string>();
    for (const line of (await fs.readFile(fileOf(this.dir, block), 'utf8')).split('\n')) {
      if (line === '') continue;
      const comma = line.indexOf(',');
      const dayNumber = line.slice(1, comma);
      let day = days.get(dayNumber);
      if (day === undefined) days.set(dayNumber, (day = new Date(Number(dayNumber) * DAY_MS).toISOString().slice(0, 10)));
      accepted.set(line.slice(comma + 1), { day, pending: line[0] === '1' });
    }
    return accepted;
  }

  async remove(): Promise<void> {
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

const fileOf = (dir: string, block: number): string => path.join(dir, `${block}.txt`);
