// The sidecars of the archive's parts (FORMAT.md): ready texts and stats sidecars. The only way
// in for the rest of the code: their keys, storing and upgrading them, and reading them.
export { readyInfoOf, readyKeyOf, sidecarKeysOf, statsInfoOf, statsKeyOf } from './keys.js';
export { readyTextsStand, storeSidecars, type ReadyTextsStored, type SidecarDeps } from './storeSidecars.js';
export { deleteStraySidecars } from './strays.js';
export { upgradeReadyTexts, upgradeStatsSidecar } from './upgrade.js';
export { readyTextsOf, readyTextsOfParts, writeReadyTexts, type ReadyStep, type ReadyTimings } from './readyWriter.js';
export { statsSidecarOf } from './statsWriter.js';
export type { ReadyIndex } from './readyFormat.js';
export { readReadyIndex, storedIndex } from './readyIndex.js';
export { readyReads, readyRunsOf, servesText, type ReadyRun } from './readyRuns.js';
export { StoredSection } from './readyReader.js';
export { GzipJoin } from './readyMember.js';
export { ReadySections, type ReadyWant } from './readySections.js';
export { openStoredParquet, type StoredParquet } from './storedParquet.js';
export { sidecarCounter } from './statsCount.js';
export { readStatsSidecar } from './statsReader.js';
