// Preloaded with `node --import`: any import of DuckDB or the AWS SDK fails the process, so a test
// shows a command answered (a usage error, bad configuration) without loading them.
import { register } from 'node:module';

const hooks = `export async function resolve(specifier, context, next) {
  if (/^@duckdb\\/|^@aws-sdk\\//.test(specifier)) throw new Error('imported ' + specifier);
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
