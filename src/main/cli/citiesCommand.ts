// `cities`: boundary versions.
import fs from 'node:fs/promises';
import type { BoundarySet } from '../../boundaries/types.js';
import { common, print, required, UsageError, withRuntime, type Command } from './options.js';

export const cities: Command = {
  summary: 'boundary versions: publish, list, rollback',
  usage: 'cities publish --cities F --local-areas F [--label TEXT] | cities list | cities rollback --to VERSION  [--json]',
  options: { ...common, cities: { type: 'string' }, 'local-areas': { type: 'string' }, label: { type: 'string' }, to: { type: 'string' } },
  run: ({ config, values, positionals }) =>
    withRuntime(config, async (rt) => {
      const sub = positionals[0];
      if (sub === 'publish') {
        const read = async (f: string) => JSON.parse(await fs.readFile(f, 'utf8')) as unknown;
        const set = {
          label: typeof values.label === 'string' ? values.label : `published ${new Date().toISOString()}`,
          cities: await read(required(values, 'cities')),
          localAreas: await read(required(values, 'local-areas')),
        } as BoundarySet;
        const result = await rt.boundaries.publish(set);
        print(values, result, () => (result.changed ? `published version ${result.version}` : `version ${result.version} is already current`));
        return 0;
      }
      if (sub === 'list') {
        const current = (await rt.boundaries.current()).version;
        const versions = await Promise.all(
          (await rt.boundaries.versions()).map(async (id) => {
            const v = await rt.boundaries.load(id);
            return { version: id, label: v.label, cities: v.set.cities.features.length, localAreas: v.set.localAreas.features.length, current: id === current };
          }),
        );
        print(values, versions, () =>
          versions.map((v) => `${v.current ? '*' : ' '} ${v.version}  ${v.cities} cities, ${v.localAreas} local areas  ${v.label}`).join('\n'),
        );
        return 0;
      }
      if (sub === 'rollback') {
        const to = required(values, 'to');
        await rt.boundaries.rollback(to);
        print(values, { version: to }, () => `current version is now ${to}`);
        return 0;
      }
      throw new UsageError('cities needs one of: publish, list, rollback');
    }),
};
