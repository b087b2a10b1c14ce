// What the CLI's commands run (the command line loads this module only once a command opens its runtime: cli/options.ts).
export { JOBS } from '../../jobs/index.js';
export { closedBefore, compact } from '../ops/compact.js';
export { purgeRetracted } from '../ops/purge.js';
export { exportWindow, partialOf, workDirOf } from '../ops/exportWindow.js';
export { importFile } from '../ops/importFile.js';
export { giveBackLocks } from '../ops/storeLock.js';
export { KeyNameInUseError, KeyRotationConflictError } from '../ledger/ledger.js';
export { reprocess } from '../ops/reprocess.js';
export { release, ReleaseError } from '../ops/release.js';
export { verify } from '../ops/verify.js';
export { addSubscription, adminOf, findSubscription, rotateSecret, shown, testSubscription } from '../events/manage.js';
export { HostPolicy } from '../events/hostPolicy.js';
export { createCommandLogger, createServiceLogger } from '../shared/log.js';
export { createRuntime } from './runtime.js';
export { startScheduler } from './scheduler.js';
export { startService } from './service.js';
export { startWorkerThread } from '../worker/thread.js';
