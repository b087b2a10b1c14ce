import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PlaceNames, type Place, type Resolution } from '../../src/boundaries/placeNames.js';

const NATIONAL = path.resolve(process.cwd(), '../shared/data/ph-national');

/** The national places: 88 provinces (`PH-<psgc>`) and 1,642 cities/municipalities with their province's name. */
function nationalPlaces(): Place[] {
  const read = (file: string): any => JSON.parse(readFileSync(path.join(NATIONAL, file), 'utf8'));
  const provinces: { psgc: string; name: string }[] = read('provinces.geojson').features.map((f: any) => f.properties);
  const provinceName = new Map(provinces.map((p) => [p.psgc, p.name]));
  const cities: { code: string; name: string; province_psgc: string | null }[] = read('cities.geojson').features.map((f: any) => f.properties);
  return [
    ...provinces.map((p): Place => ({ code: `PH-${p.psgc}`, name: p.name, level: 'province' })),
    ...cities.map((c): Place => {
      const province = c.province_psgc === null ? undefined : provinceName.get(c.province_psgc);
      if (c.province_psgc !== null && province === undefined) throw new Error(`no province ${c.province_psgc}`);
      return { code: c.code, name: c.name, level: 'city', province };
    }),
  ];
}

const places = nationalPlaces();
const names = new PlaceNames(places);

/** The code an input resolves to (fails the test with the resolution when it does not resolve). */
function codeOf(input: string, pn: PlaceNames = names): string {
  const r = pn.resolve(input);
  if (!r.ok) throw new Error(`${JSON.stringify(input)} did not resolve: ${JSON.stringify(r)}`);
  return r.place.code;
}

function failure(input: string, pn: PlaceNames = names): Extract<Resolution, { ok: false }> {
  const r = pn.resolve(input);
  if (r.ok) throw new Error(`${JSON.stringify(input)} resolved to ${r.place.code} (${r.label})`);
  return r;
}

describe('PlaceNames on the two-city set', () => {
  const two = new PlaceNames([
    { code: 'PH-QC', name: 'Quezon City', level: 'city' },
    { code: 'PH-PG', name: 'Pampanga', level: 'province' },
  ]);

  it('resolves both names in any case', () => {
    for (const input of ['Quezon City', 'quezon city', 'QUEZON CITY', ' Quezon  City. ', 'City of Quezon']) {
      expect(two.resolve(input)).toEqual({ ok: true, place: { code: 'PH-QC', name: 'Quezon City', level: 'city' }, label: 'Quezon City' });
    }
    for (const input of ['Pampanga', 'pampanga', 'Province of Pampanga', 'Pampanga (province)']) {
      expect(two.resolve(input)).toMatchObject({ ok: true, place: { code: 'PH-PG', level: 'province' }, label: 'Pampanga' });
    }
    expect(two.labels()).toEqual(['Pampanga', 'Quezon City']);
  });

  it('calls Manila unknown and suggests what it knows', () => {
    const r = failure('Manila', two);
    expect(r.reason).toBe('unknown');
    expect(r.suggestions.length).toBeGreaterThan(0);
    for (const s of r.suggestions) expect(two.labels()).toContain(s);
  });
});

describe('PlaceNames on the national data', () => {
  it('has every place, and every label resolves back to its own place', () => {
    expect(places.filter((p) => p.level === 'province')).toHaveLength(88);
    expect(places.filter((p) => p.level === 'city')).toHaveLength(1642);
    expect(places.filter((p) => p.level === 'city' && p.province === undefined)).toHaveLength(16);

    const labels = names.labels();
    expect(labels).toHaveLength(1730);
    expect(new Set(labels).size).toBe(1730);
    expect([...labels].sort(new Intl.Collator('en').compare)).toEqual(labels);

    const seen = new Set<string>();
    for (const label of labels) {
      const r = names.resolve(label);
      expect(r, label).toMatchObject({ ok: true, label });
      if (r.ok) seen.add(r.place.code);
    }
    expect(seen).toEqual(new Set(places.map((p) => p.code)));
  });

  it('labels a place by its official name unless that name alone is ambiguous', () => {
    const labelOf = new Map(names.labels().map((l) => [codeOf(l), l]));
    const qualified = places.filter((p) => labelOf.get(p.code) !== p.name);
    // 371 places need more than their name: 351 cities/municipalities sharing 134 official names and 20 provinces.
    expect(qualified.filter((p) => p.level === 'city')).toHaveLength(351);
    expect(new Set(qualified.filter((p) => p.level === 'city').map((p) => p.name)).size).toBe(134);
    expect(qualified.filter((p) => p.level === 'province').map((p) => labelOf.get(p.code)).sort()).toEqual(
      ['Aurora', 'Batangas', 'Biliran', 'Bulacan', 'Cavite', 'Cebu', 'Cotabato', 'Iloilo', 'Isabela', 'Leyte', 'Masbate', 'Quezon', 'Quirino', 'Rizal', 'Romblon', 'Sarangani', 'Siquijor', 'Sorsogon', 'Sultan Kudarat', 'Tarlac'].map(
        (n) => `${n} (province)`,
      ),
    );
    for (const p of qualified.filter((q) => q.level === 'city')) expect(labelOf.get(p.code)).toBe(`${p.name}, ${p.province}`);
    expect(names.labels().filter((l) => l.includes('PH-'))).toEqual([]);
    expect(labelOf.get('PH-1381300000')).toBe('Quezon City');
    expect(labelOf.get('PH-0730600000')).toBe('City of Cebu');
    expect(labelOf.get('PH-0401022000')).toBe('San Jose, Batangas');
    expect(labelOf.get('PH-0305416000')).toBe('City of San Fernando, Pampanga');
    expect(labelOf.get('PH-0305400000')).toBe('Pampanga');
  });

  it('calls a name shared by several places ambiguous and suggests labels that resolve', () => {
    const r = failure('San Jose');
    expect(r.reason).toBe('ambiguous');
    // Every place it may mean: each partner finds its own.
    expect(r.suggestions).toEqual([
      'San Jose City',
      ...['Antique', 'Batangas', 'Camarines Sur', 'Dinagat Islands', 'Negros Oriental', 'Northern Samar', 'Occidental Mindoro', 'Romblon', 'Tarlac'].map((p) => `San Jose, ${p}`),
    ]);
    for (const s of r.suggestions) expect(names.resolve(s)).toMatchObject({ ok: true, label: s, place: { name: expect.stringMatching(/^San Jose( City)?$/) } });

    expect(codeOf('San Jose, Batangas')).toBe('PH-0401022000');
    expect(codeOf('san jose,batangas')).toBe('PH-0401022000');
    expect(codeOf('SAN JOSE , Province of Batangas')).toBe('PH-0401022000');
    expect(codeOf('San Jose City')).toBe('PH-0304926000');
    expect(codeOf('City of San Jose')).toBe('PH-0304926000');
    expect(codeOf('Santa Cruz, Laguna')).toBe('PH-0403426000');
    expect(codeOf('Sta. Cruz, laguna')).toBe('PH-0403426000');
    expect(failure('San Isidro').reason).toBe('ambiguous');
  });

  it('treats "City of X", "X City" and "X" as the same name, with an exact official name first', () => {
    // Two cities named "City of San Fernando" (La Union, Pampanga) and five municipalities "San Fernando".
    const cities = ['City of San Fernando, La Union', 'City of San Fernando, Pampanga'];
    expect(failure('City of San Fernando')).toEqual({ ok: false, reason: 'ambiguous', suggestions: cities });
    expect(failure('San Fernando City')).toEqual({ ok: false, reason: 'ambiguous', suggestions: cities });
    const bare = failure('San Fernando');
    expect(bare.reason).toBe('ambiguous');
    expect(bare.suggestions.slice(0, 2)).toEqual(cities);
    expect(bare.suggestions).toContain('San Fernando, Cebu');
    expect(codeOf('San Fernando City, Pampanga')).toBe('PH-0305416000');
    expect(codeOf('san fernando, pampanga')).toBe('PH-0305416000');
    expect(codeOf('San Fernando, Cebu')).toBe('PH-0702241000');

    // "Quezon City" is an official name; "Quezon" is a province, municipalities and (loosened) Quezon City.
    for (const input of ['Quezon City', 'quezon city', 'QUEZON CITY', 'City of Quezon', 'Quezon City, Metro Manila']) {
      expect(codeOf(input)).toBe('PH-1381300000');
    }
    const quezon = failure('Quezon');
    expect(quezon).toEqual({ ok: false, reason: 'ambiguous', suggestions: ['Quezon (province)', 'Quezon City', 'Quezon, Bukidnon', 'Quezon, Isabela', 'Quezon, Nueva Ecija', 'Quezon, Nueva Vizcaya', 'Quezon, Palawan', 'Quezon, Quezon'] });
    for (const input of ['Quezon (province)', 'Province of Quezon', 'quezon province', 'Quezon Prov.']) expect(codeOf(input)).toBe('PH-0405600000');
    expect(codeOf('Quezon, Quezon')).toBe('PH-0405637000');
    expect(codeOf('Mountain Province')).toBe('PH-1404400000');

    // Cities whose official name is "City of X" answer to "X City" and, when unshared, to "X".
    expect(codeOf('Cebu City')).toBe('PH-0730600000');
    expect(failure('Cebu')).toEqual({ ok: false, reason: 'ambiguous', suggestions: ['Cebu (province)', 'City of Cebu'] });
    expect(codeOf('Manila')).toBe('PH-1380600000');
    expect(codeOf('Davao City')).toBe('PH-1130700000');
    expect(codeOf('Science City of Muñoz')).toBe(codeOf('Munoz'));
    expect(codeOf('Samal City')).toBe(codeOf('Island Garden City of Samal'));
    expect(failure('Samal').suggestions).toEqual(['Island Garden City of Samal', 'Samal, Bataan']);
    expect(codeOf('Isabela City')).toBe('PH-0990101000');
    expect(failure('Isabela').suggestions).toEqual(['Isabela (province)', 'City of Isabela', 'Isabela, Negros Occidental']);
    // A province with no city of that name resolves bare.
    expect(codeOf('Pampanga')).toBe('PH-0305400000');
  });

  it('forgives case, accents, punctuation, spacing and Sto./Sta./Gen.', () => {
    const penarrubia = 'PH-1400117000';
    for (const input of ['Peñarrubia', 'Penarrubia', 'PENARRUBIA', 'PEÑARRUBIA', 'Pen\u0303arrubia', '  peñarrubia ,']) expect(codeOf(input)).toBe(penarrubia);
    expect(codeOf('Las Pinas')).toBe(codeOf('City of Las Piñas'));
    expect(codeOf('dasmarinas city')).toBe(codeOf('City of Dasmariñas'));
    expect(codeOf('Lapu Lapu')).toBe('PH-0731100000');
    expect(codeOf('lapulapu city')).toBe('PH-0731100000');
    expect(codeOf('Tboli')).toBe(codeOf("T'Boli"));
    expect(codeOf('t’boli')).toBe(codeOf("T'Boli"));
    expect(codeOf('Brookes Point')).toBe(codeOf("Brooke'S Point"));
    expect(codeOf('Sto. Tomas, Pampanga')).toBe('PH-0305421000');
    expect(codeOf('Santo Tomas, Pampanga')).toBe('PH-0305421000');
    expect(codeOf('Santo Tomas City')).toBe(codeOf('City of Sto. Tomas'));
    expect(codeOf('Sta Rosa City')).toBe(codeOf('City of Santa Rosa'));
    expect(codeOf('General Mariano Alvarez')).toBe(codeOf('Gen. Mariano Alvarez'));
    expect(codeOf('Gen. Santos City')).toBe('PH-1230800000');
    expect(codeOf('san  juan, ncr')).toBe('PH-1381400000');
  });

  it('suggests close labels for unknown names', () => {
    const cebu = failure('Cebu Ctiy');
    expect(cebu.reason).toBe('unknown');
    expect(cebu.suggestions[0]).toBe('City of Cebu');
    expect(failure('Manilla').suggestions[0]).toBe('City of Manila');
    expect(failure('Penarubia').suggestions[0]).toBe('Peñarrubia');
    expect(failure('Mountain').suggestions[0]).toBe('Mountain Province');
    const jose = failure('San Jsoe');
    expect(jose.reason).toBe('unknown');
    expect(jose.suggestions).toHaveLength(5);
    for (const s of jose.suggestions) expect(s).toMatch(/^San Jose/);
    for (const input of ['Xyzzy', 'Cebu Ctiy', 'Quezzon']) {
      const r = failure(input);
      expect(r.suggestions.length).toBeGreaterThan(0);
      expect(r.suggestions.length).toBeLessThanOrEqual(5);
      for (const s of r.suggestions) expect(names.resolve(s)).toMatchObject({ ok: true, label: s });
    }
    expect(failure('')).toEqual({ ok: false, reason: 'unknown', suggestions: [] });
    expect(failure('x'.repeat(201))).toEqual({ ok: false, reason: 'unknown', suggestions: [] });
  });

  it('calls a known name in the wrong province unknown, suggesting that name elsewhere', () => {
    // No San Jose in Cebu (the one in Central Visayas is in Negros Oriental).
    const r = failure('San Jose, Cebu');
    expect(r.reason).toBe('unknown');
    expect(r.suggestions).toHaveLength(5);
    for (const s of r.suggestions) expect(s).toMatch(/^San Jose/);
    expect(failure('San Jose, Batangs').suggestions[0]).toBe('San Jose, Batangas');
    expect(failure('Quezon City, Pampanga')).toEqual({ ok: false, reason: 'unknown', suggestions: ['Quezon City'] });
  });

  it('resolves codes, falls back to codes in labels, and rejects duplicate codes', () => {
    expect(codeOf('PH-1381300000')).toBe('PH-1381300000');
    expect(codeOf('City of Naga, PH-0702234000')).toBe('PH-0702234000');
    const twins = new PlaceNames([
      { code: 'PH-A', name: 'City of Twin', level: 'city' },
      { code: 'PH-B', name: 'City of Twin', level: 'city' },
      { code: 'PH-C', name: '—', level: 'city' },
    ]);
    expect(twins.labels()).toEqual(['City of Twin, PH-A', 'City of Twin, PH-B', 'PH-C']);
    expect(failure('Twin City', twins)).toEqual({ ok: false, reason: 'ambiguous', suggestions: ['City of Twin, PH-A', 'City of Twin, PH-B'] });
    expect(codeOf('twin city, ph-b', twins)).toBe('PH-B');
    expect(() => new PlaceNames([...places, { code: 'PH-1381300000', name: 'Elsewhere', level: 'city' }])).toThrow(/unique/);
  });
});
