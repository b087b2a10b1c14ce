// Where an import keeps its checkpoint, checked before the import opens anything: light (no
// engine), so the command line tells a mistake at once, and the import itself checks again.
import fs from 'node:fs/promises';
import path from 'node:path';
import { checkWritable, linkTarget } from '../shared/files.js';
import { ImportInputError } from './importRecords.js';

/** Where an import of `file` keeps its checkpoint unless told: beside it. */
export const checkpointFileOf = (file: string): string => `${file}.import-state.json`;

/**
 * Whether the checkpoint can be kept at `stateFile`: never the input (the checkpoint is written
 * over by a rename, which would replace it), never a folder, in a folder this user can write in,
 * found now rather than at the first save (a run that stops there has nothing to resume from).
 * ImportInputError if not; creates and changes nothing.
 */
export async function checkCheckpointFile(stateFile: string, file: string): Promise<void> {
  const told = stateFile !== checkpointFileOf(file);
  const real = (named: string) => linkTarget(named).catch(() => path.resolve(named));
  if ((await real(stateFile)) === (await real(file))) throw new ImportInputError(`--checkpoint ${stateFile} is the file to import: name another file for the checkpoint`);
  if ((await fs.stat(stateFile).catch(() => undefined))?.isDirectory()) throw new ImportInputError(`--checkpoint ${stateFile} is a folder: name the file to keep the checkpoint in`);
  await checkWritable(stateFile).catch((err: NodeJS.ErrnoException) => {
    throw new ImportInputError(
      told
        ? `--checkpoint ${stateFile} cannot be written (${err.code ?? err.message}): name a file in a folder this user can write`
        : `the checkpoint ${stateFile} cannot be written beside the file (${err.code ?? err.message}): keep it elsewhere with --checkpoint F (and the rejects with --rejects F), or import a copy of the file from a folder this user can write`,
    );
  });
}
