// Where an import writes its rejects, checked before the import opens anything: light (no engine),
// so the command line tells a mistake at once; and the writing of them, resumed with the run.
import fs from 'node:fs/promises';
import path from 'node:path';
import { checkWritable, fsyncDir, linkTarget, writeDurably } from '../shared/files.js';
import { ImportInputError } from './importRecords.js';

/** Where an import of `file` writes its rejects unless told. */
export const rejectsFileOf = (file: string): string => `${file}.rejected.ndjson`;

/**
 * Whether the rejects can be written at `rejectsFile`: never over the input or the checkpoint (a
 * `--rejects` naming the input would empty it), in a folder that is there, and writable, found
 * now rather than at the first reject (a run that stops there has nothing to resume from).
 * ImportInputError if not. Creates and changes nothing (another run may be writing there).
 */
export async function checkRejectsFile(rejectsFile: string, others: readonly string[]): Promise<void> {
  const real = (file: string) => linkTarget(file).catch(() => path.resolve(file));
  const rejects = await real(rejectsFile);
  for (const other of others) {
    if (rejects === (await real(other))) throw new ImportInputError(`--rejects ${rejectsFile} is ${other}: the rejects file is written over, so it must be another file`);
  }
  const folder = await fs.stat(path.dirname(rejects)).catch(() => undefined);
  if (!folder?.isDirectory()) throw new ImportInputError(`--rejects ${rejectsFile}: there is no folder ${path.dirname(rejectsFile)} to write it in`);
  const found = await fs.stat(rejects).catch(() => undefined);
  if (found?.isDirectory()) throw new ImportInputError(`--rejects ${rejectsFile} is a folder: name the file to write the rejects to`);
  // Flushed, and cut back to what a resumed run kept: a device or a pipe is neither.
  if (found && !found.isFile()) throw new ImportInputError(`--rejects ${rejectsFile} is not a regular file (a device or a pipe): name a file to write the rejects to`);
  await checkWritable(rejects).catch((err: NodeJS.ErrnoException) => {
    throw new ImportInputError(`--rejects ${rejectsFile} cannot be written (${err.code ?? err.message}): name another file`);
  });
}

/**
 * A run's rejects file. A new run writes it over at its first reject (or when `finish` says its
 * pass is done), not before: a run that stops at once (a file not of the format given) leaves the
 * last run's. A resumed run keeps the rejects of the records done, and none of those it does again.
 * The checkpoint holds how many bytes of it belong to the records done (`rejectsBytes`).
 */
export class RejectsWriter {
  private constructor(
    readonly file: string,
    private readonly checkpoint: { rejectsBytes?: number },
    private fresh: boolean,
  ) {}

  /** `resumed`: the checkpoint is of records done by an earlier run. */
  static async open(file: string, checkpoint: { rejectsBytes?: number }, resumed: boolean): Promise<RejectsWriter> {
    if (!resumed) {
      checkpoint.rejectsBytes = 0;
    } else {
      const size = (await fs.stat(file).catch(() => undefined))?.size ?? 0;
      if (checkpoint.rejectsBytes === undefined) checkpoint.rejectsBytes = size;
      else if (size > checkpoint.rejectsBytes) await fs.truncate(file, checkpoint.rejectsBytes);
    }
    return new RejectsWriter(file, checkpoint, !resumed);
  }

  /** Appends `text`, on disk before the checkpoint that counts it is written. */
  async append(text: string): Promise<void> {
    if (this.fresh) {
      await fs.writeFile(this.file, '');
      // Its name too, in a folder of the operator's choosing.
      await fsyncDir(path.dirname(path.resolve(this.file)));
    }
    this.fresh = false;
    await writeDurably(this.file, 'a', text);
    this.checkpoint.rejectsBytes = (this.checkpoint.rejectsBytes ?? 0) + Buffer.byteLength(text);
  }

  /** A new run without rejects leaves an empty file, not the last run's. */
  async finish(): Promise<void> {
    if (this.fresh) await this.append('');
  }
}
