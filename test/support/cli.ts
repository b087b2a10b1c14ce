// The compiled entry point (`npm run build` first), as the CLI tests run it.
export { CLI, runCli } from '../../bench/server.js';
