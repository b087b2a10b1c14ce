// The service's version, from its package.json. It is part of every cache key and strong
// validator of rendered output: answers kept by one release are never served by another,
// which may render the same reports differently.
import { projectVersion } from './projectDir.js';

export const SERVICE_VERSION = projectVersion();
