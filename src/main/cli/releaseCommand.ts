// `release --period 2025`: an immutable, citable snapshot of a closed period (src/releases/FORMAT.md).
import { createProgress } from '../../ops/progress.js';
import { notClosed, parsePeriod } from '../../releases/layout.js';
import { common, deps, interruptible, print, required, UsageError, withRuntime, type Command } from './options.js';

export const release: Command = {
  summary: 'write an immutable, citable release of a closed UTC year or month (GeoParquet, CSV.gz, manifest, STAC, citation)',
  usage: 'release --period YYYY|YYYY-MM [--json]',
  options: { ...common, period: { type: 'string' } },
  run: ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const period = required(values, 'period');
    const parsed = parsePeriod(period);
    if (!parsed) throw new UsageError(`--period must be a UTC year (2025) or month (2025-06), not ${JSON.stringify(period)}`);
    const open = notClosed(parsed, Date.now());
    if (open) throw new UsageError(open);
    return withRuntime(config, async (rt) => {
      try {
        const result = await interruptible('release', `run the same command again: it finishes the revision, or makes the next one`, () =>
          deps.release(rt, period, { progress: values.json ? undefined : createProgress('release') }),
        );
        print(values, result, () =>
          result.created
            ? `released ${result.release}: ${result.reports} report${result.reports === 1 ? '' : 's'} in ${result.files} files (${result.bytes} bytes) under releases/${result.release}/`
            : `${result.release} already holds these reports, file for file: no new revision`,
        );
        return 0;
      } catch (err) {
        if (err instanceof deps.ReleaseError && err.usage) throw new UsageError(err.message);
        throw err;
      }
    });
  },
};
