// Writing a stream to a file that its caller removes when the write fails (an export's or a
// copy's temporary name). The caller's clean-up must be the last word: a write stream that
// opens its file itself could still be opening it when the pipeline failed, and create the
// file after the clean-up had run (an export left `out.csv.partial-…` beside its file).
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { pipeToFile } from '../../src/shared/files.js';
import { tempDir } from '../support/env.js';

describe('pipeToFile', () => {
  it('writes what the source gives, through its transforms', async () => {
    const dir = await tempDir('flood-pipe-');
    const file = path.join(dir, 'out.txt');
    const upper = new Transform({ transform: (chunk: Buffer, _e, done) => done(null, chunk.toString().toUpperCase()) });
    await pipeToFile(file, Readable.from(['flood ', 'report']), upper);
    expect(await fs.readFile(file, 'utf8')).toBe('FLOOD REPORT');
  });

  it('settles only once its file is opened and let go, so a clean-up after it is the last word', async () => {
    // A named pipe with no reader: opening it for writing waits, as a slow disk's open can.
    const dir = await tempDir('flood-pipe-');
    const fifo = path.join(dir, 'out.partial');
    await promisify(execFile)('mkfifo', [fifo]);
    const failing = new Readable({
      read() {
        this.destroy(new Error('the store went away'));
      },
    });
    const settled = pipeToFile(fifo, failing).then(() => 'resolved', (err: Error) => err.message);
    // Failing while its file was still being opened, it must not give up before the open ends:
    // the caller would remove the name, and the open would then create it.
    const early = await Promise.race([settled, sleep(300).then(() => 'still opening')]);
    // A reader (opened without waiting for a writer) lets the open end, whatever happened above.
    const reader = await fs.open(fifo, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    try {
      expect(early).toBe('still opening');
      expect(await settled).toBe('the store went away');
    } finally {
      await reader.close();
    }
  });
});
