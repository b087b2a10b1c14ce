// What `admin=` may name in a boundary version, and the cities it covers: a city (its own code), or
// in a national version a province or region (`PH-` and its PSGC code), which covers its cities
// (an independent city counts in the province that holds it: hierarchy.ts).
// Reports carry their city's code (instance_region_code), so a filter by any level is a filter by
// the set of cities it covers, as the current version draws them.
import type { CompactLevels } from './compactLevels.js';
import { areaCode, cityParents, type CityParents } from './hierarchy.js';
import { byCodeUnits } from '../shared/byCodeUnits.js';

export type AdminLevel = 'region' | 'province' | 'city';

export interface AdminArea {
  code: string;
  name: string;
  level: AdminLevel;
  /** The city codes it covers (itself, for a city). */
  cities: readonly string[];
}

/** At most this many codes are listed in an error; a longer list points at where to find them. */
const LISTED = 12;

export class AdminAreas {
  private readonly byCode = new Map<string, AdminArea>();
  /** Each city's province and region code (absent: none in this version). */
  private readonly parents = new Map<string, { province?: string; region?: string }>();
  readonly levels: ReadonlySet<AdminLevel>;

  constructor(
    /** The version's levels: their properties name the areas. */
    levels: CompactLevels,
    /** The boundary version's id: answers rolled up by this hierarchy are cached under it. */
    readonly version = '',
    /** Each city's province and region (hierarchy.ts), when the caller has them already. */
    parents: CityParents = cityParents(levels),
  ) {
    const cities = levels.cities.properties;
    const covered = (codes: readonly (string | null)[], code: string) => cities.filter((_, i) => codes[i] === code).map((c) => c.code);
    for (const region of levels.regions?.properties ?? []) {
      const code = areaCode(region.psgc);
      this.add({ code, name: region.name, level: 'region', cities: covered(parents.region, code) });
    }
    for (const province of levels.provinces?.properties ?? []) {
      const code = areaCode(province.psgc);
      this.add({ code, name: province.name, level: 'province', cities: covered(parents.province, code) });
    }
    // A city's own code wins over a province or region that shares it.
    cities.forEach((c, i) => {
      this.byCode.set(c.code, { code: c.code, name: c.name, level: 'city', cities: [c.code] });
      this.parents.set(c.code, { ...(parents.province[i] && { province: parents.province[i] }), ...(parents.region[i] && { region: parents.region[i] }) });
    });
    this.levels = new Set<AdminLevel>(['city', ...(levels.provinces ? (['province'] as const) : []), ...(levels.regions ? (['region'] as const) : [])]);
  }

  /** A city's province or region code in this version; null where it has none (or the city is not in it). */
  parentOf(city: string, level: 'province' | 'region'): string | null {
    return this.parents.get(city)?.[level] ?? null;
  }

  private add(area: AdminArea): void {
    if (!this.byCode.has(area.code)) this.byCode.set(area.code, area);
  }

  get(code: string): AdminArea | undefined {
    return this.byCode.get(code);
  }

  /** The message of a 400 for a code this version does not have: the codes, or where to find them, and the closest; `of` names the version. */
  problem(code: string, of = 'the current boundaries'): string {
    const codes = [...this.byCode.keys()];
    // Codes are matched as written: one in the wrong case is told its own spelling.
    const cased = codes.find((c) => c.toUpperCase() === code.toUpperCase());
    if (cased) return `must be written ${cased} (codes are matched as written, in upper case)`;
    if (codes.length <= LISTED) return `must be one of: ${codes.join(', ')}`;
    const ranked = codes.map((c) => ({ c, shared: commonPrefix(c, code) })).sort((a, b) => b.shared - a.shared || byCodeUnits(a.c, b.c));
    const what = `must be the code of a region, province or city of ${of} (GET /cities, /ogc/collections)`;
    // Sharing no more than "PH-" is no likeness: the first codes in order would only mislead.
    if (ranked[0]!.shared <= 'PH-'.length) return `${what}; none of its codes begins as ${code.slice(0, 40)} does`;
    return `${what}; closest: ${ranked
      .slice(0, 5)
      .map(({ c }) => `${c} (${this.byCode.get(c)!.name})`)
      .join(', ')}`;
  }
}

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
