// `cities`: boundary versions.
import fs from 'node:fs/promises';
import path from 'node:path';
import { BoundaryFileError, readBoundaryFile, readBoundaryFolder } from '../../boundaries/folder.js';
import type { BoundarySet } from '../../boundaries/types.js';
import { common, print, required, UsageError, withRuntime, type Command, type Values } from './options.js';

export const cities: Command = {
  summary: 'boundary versions: publish, list, rollback',
  usage:
    'cities publish --from DIR | --cities F --local-areas F  [--label TEXT] [--attribution TEXT] | cities list | cities rollback --to VERSION  [--json]\n' +
    '  --from DIR: a folder of regions.geojson, provinces.geojson (both optional), cities.geojson and local-areas.geojson',
  options: { ...common, from: { type: 'string' }, cities: { type: 'string' }, 'local-areas': { type: 'string' }, label: { type: 'string' }, attribution: { type: 'string' }, to: { type: 'string' } },
  subcommandOptions: { publish: ['from', 'cities', 'local-areas', 'label', 'attribution'], list: [], rollback: ['to'] },
  subcommand: true,
  run: async ({ config, values, positionals }) => {
    const sub = positionals[0];
    if (sub !== 'publish' && sub !== 'list' && sub !== 'rollback') throw new UsageError('cities needs one of: publish, list, rollback');
    if (sub === 'rollback') required(values, 'to');
    // Options and files are read before anything opens: a mistake is a usage error (2), never a store's (69).
    const set = sub === 'publish' ? await publishedSet(values) : undefined;
    return withRuntime(config, async (rt) => {
      if (set) {
        const result = await rt.boundaries.publish(set);
        const levels = `${set.regions?.features.length ?? 0} regions, ${set.provinces?.features.length ?? 0} provinces, ${set.cities.features.length} cities, ${set.localAreas.features.length} local areas`;
        print(values, { ...result, label: set.label, levels }, () => (result.changed ? `published version ${result.version}: ${levels}` : `version ${result.version} is already current`));
        return 0;
      }
      if (sub === 'list') {
        // Listed also when no version is current (the pointer lost or unreadable): what to roll back to.
        const current = await rt.boundaries.current().then(
          (v) => v.version,
          () => undefined,
        );
        const versions = await Promise.all(
          (await rt.boundaries.versions()).map(async (id) => {
            const v = await rt.boundaries.load(id);
            return { version: id, label: v.label, regions: v.levels.regions?.properties.length ?? 0, provinces: v.levels.provinces?.properties.length ?? 0, cities: v.levels.cities.properties.length, localAreas: v.levels.localAreas.properties.length, current: id === current };
          }),
        );
        print(values, versions, () =>
          versions.map((v) => `${v.current ? '*' : ' '} ${v.version}  ${v.regions ? `${v.regions} regions, ${v.provinces} provinces, ` : ''}${v.cities} cities, ${v.localAreas} local areas  ${v.label}`).join('\n'),
        );
        return 0;
      }
      if (sub === 'rollback') {
        const to = required(values, 'to');
        if (!(await rt.boundaries.versions()).includes(to)) throw new UsageError(`--to ${to}: no such version (cities list shows them)`);
        await rt.boundaries.rollback(to);
        print(values, { version: to }, () => `current version is now ${to}`);
        return 0;
      }
      throw new UsageError('cities needs one of: publish, list, rollback');
    });
  },
};

/** The boundary set `cities publish` is given: its files read and checked. */
async function publishedSet(values: Values): Promise<BoundarySet> {
  for (const option of ['label', 'attribution'] as const) if (values[option] !== undefined) required(values, option);
  const from = typeof values.from === 'string' ? values.from : undefined;
  if (from !== undefined && (values.cities !== undefined || values['local-areas'] !== undefined)) throw new UsageError('publish takes --from, or --cities with --local-areas, not both');
  // The label is part of the version's content: one without a time makes the same data the same version again.
  const source = from !== undefined ? path.basename(path.resolve(from)) : [values.cities, values['local-areas']].map((f) => path.basename(String(f))).join(' and ');
  const label = typeof values.label === 'string' ? values.label : `published from ${source}`;
  const attribution = typeof values.attribution === 'string' ? values.attribution : undefined;
  if (from === undefined && (typeof values.cities !== 'string' || typeof values['local-areas'] !== 'string')) throw new UsageError('publish takes --from DIR, or --cities F with --local-areas F');
  // A file or folder that is not there is the command's mistake (exit 2), not a failure.
  for (const [option, file] of [['from', from], ['cities', values.cities], ['local-areas', values['local-areas']]] as const) {
    if (typeof file === 'string' && !(await fs.stat(file).catch(() => undefined))) throw new UsageError(`--${option} ${file}: no such ${option === 'from' ? 'folder' : 'file'}`);
  }
  let set: BoundarySet;
  try {
    set =
      from !== undefined
        ? await readBoundaryFolder(from, { label, attribution })
        : ({ label, ...(attribution !== undefined && { attribution }), cities: await readBoundaryFile(required(values, 'cities')), localAreas: await readBoundaryFile(required(values, 'local-areas')) } as BoundarySet);
  } catch (err) {
    // A file missing, a folder, or not JSON: the command's mistake, named (exit 2).
    if (err instanceof BoundaryFileError) throw new UsageError(err.message);
    throw err;
  }
  return set;
}

