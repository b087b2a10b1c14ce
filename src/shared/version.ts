// The service's version, from its package.json. It is part of every cache key and strong
// validator of rendered output: answers kept by one release are never served by another,
// which may render the same reports differently.
import { createHash } from 'node:crypto';
import { projectVersion } from './projectDir.js';

export const SERVICE_VERSION = projectVersion();

/** The version as a short token for validators built of names (ETags of boundary documents). */
export const VERSION_TAG = createHash('sha256').update(SERVICE_VERSION).digest('base64url').slice(0, 10).replace(/[^A-Za-z0-9]/g, '0');
