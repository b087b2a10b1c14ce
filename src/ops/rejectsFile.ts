// Where an import writes its rejects, checked before the import opens anything: light (no engine),
// so the command line tells a mistake at once.
import fs from 'node:fs/promises';
import path from 'node:path';
import { checkWritable, linkTarget } from '../shared/files.js';
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
  if ((await fs.stat(rejects).catch(() => undefined))?.isDirectory()) throw new ImportInputError(`--rejects ${rejectsFile} is a folder: name the file to write the rejects to`);
  await checkWritable(rejects).catch((err: NodeJS.ErrnoException) => {
    throw new ImportInputError(`--rejects ${rejectsFile} cannot be written (${err.code ?? err.message}): name another file`);
  });
}
