// The sidecars of the archive's parts (FORMAT.md): ready texts and stats sidecars. The only way
// in for the rest of the code: their keys, writing and upgrading them, and reading them.
export { readyInfoOf, readyKeyOf, sidecarKeysOf, statsInfoOf, statsKeyOf } from './keys.js';
export { storeSidecars, type SidecarDeps } from './storeSidecars.js';
export { upgradeReadyTexts, upgradeStatsSidecar } from './upgrade.js';
export { writeReadyTexts } from './readyWriter.js';
export { statsSidecarOf } from './statsWriter.js';
export type { ReadyIndex } from './readyFormat.js';
export { readReadyIndex, storedIndex, type ReadyFile } from './readyIndex.js';
export { readyReads, readyRunsOf, servesText, type ReadyRun } from './readyRuns.js';
export { readItems, readSelection, streamHours } from './readyReader.js';
export { selectItems, type ItemFilter, type Selection } from './itemFilter.js';
export { openStoredParquet, type StoredParquet } from './storedParquet.js';
export { sidecarCounter, type Bucketer, type StatsKey } from './statsCount.js';
export { readStatsSidecar, type StatsReports } from './statsReader.js';
export { CHUNK_BYTES, releaseChunk as pieceWritten } from './readBuffers.js';
