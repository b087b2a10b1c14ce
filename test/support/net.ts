// Loopback ports for child processes.
export { freePort } from '../../bench/server.js';
