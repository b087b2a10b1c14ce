// The thread a large boundary version is parsed on (versionParse.ts): the stored bytes in, the
// parsed version out, then the thread ends. A version that does not parse ends it with the error.
import { parentPort, workerData } from 'node:worker_threads';
import { parseVersion, type StoredVersion } from './versionParse.js';

parentPort!.postMessage(parseVersion(workerData as StoredVersion));
