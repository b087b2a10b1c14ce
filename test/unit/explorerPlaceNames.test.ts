// The explorer's "Find a place" (web/placeNames.js, plain JavaScript for the page) forgives names
// as the feed's partner_city does (src/boundaries/placeNames.ts): every form of a national city's
// name the feed takes as that city, the page finds as that city; and it lists no two places alike.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cityParents } from '../../src/boundaries/hierarchy.js';
import { compactLevels } from '../../src/boundaries/compactLevels.js';
import { PlaceNames, placesOf } from '../../src/boundaries/placeNames.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

interface Listed {
  place: { level: string; code: string; name: string };
  label: string;
}
interface PagePlaceNames {
  listPlaces(places: { level: string; code: string; name: string; province?: string }[], provinceName: (code: string) => string | undefined): Listed[];
  findPlace(listed: Listed[], typed: string): { level: string; code: string } | undefined;
}

const MODULE = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/placeNames.js')).href;

describe("the explorer's place names", () => {
  it('find every national city by each form of its name the feed takes as that city, and list no two places alike', async () => {
    const { listPlaces, findPlace } = (await import(MODULE)) as PagePlaceNames;
    const set = await loadNationalBoundaries();
    const levels = compactLevels(set);
    const { province } = cityParents(levels);
    const provinceNames = new Map(set.provinces!.features.map((f) => [`PH-${f.properties.psgc}`, f.properties.name]));
    // As the page lists them: regions, provinces, then cities, each city with its province's code.
    const listed = listPlaces(
      [
        ...set.regions!.features.map((f) => ({ level: 'region', code: `PH-${f.properties.psgc}`, name: f.properties.name })),
        ...set.provinces!.features.map((f) => ({ level: 'province', code: `PH-${f.properties.psgc}`, name: f.properties.name })),
        ...set.cities.features.map((f, i) => ({ level: 'city', code: f.properties.code, name: f.properties.name, ...(province[i] && { province: province[i]! }) })),
      ],
      (code) => provinceNames.get(code),
    );
    expect(new Set(listed.map((e) => e.label)).size).toBe(listed.length);
    expect(listed.map((e) => e.label)).toContain('San Jose (Batangas)');

    const feed = new PlaceNames(placesOf(set));
    const missed: string[] = [];
    let checked = 0;
    for (const f of set.cities.features) {
      const name = f.properties.name;
      // Without its city marker, wherever it stands ("Science City of Muñoz" is Muñoz).
      const base = name.replace(/^.*\bCity of /i, '').replace(/ City$/i, '');
      const plain = name.normalize('NFD').replace(/\p{M}/gu, '');
      for (const form of new Set([name, base, `${base} City`, `city of ${base.toLowerCase()}`, plain.toUpperCase(), name.replace(/'/g, '\u2019'), name.replace(/\bSanto\b/, 'Sto.').replace(/\bSanta\b/, 'Sta.')])) {
        const resolved = feed.resolve(form);
        if (!resolved.ok || resolved.place.code !== f.properties.code) continue;
        checked++;
        const found = findPlace(listed, form);
        if (found?.code !== f.properties.code) missed.push(`${form} → ${found?.code ?? 'nothing'} (the feed: ${f.properties.code})`);
      }
    }
    expect(checked).toBeGreaterThan(3000);
    expect(missed).toEqual([]);
  });
});
