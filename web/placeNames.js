// The places the explorer lists and finds by name, forgiving as the feed's partner_city is
// (src/boundaries/placeNames.ts): accents, case, apostrophes (T'boli, T’Boli), "Sto."/"Sta.",
// and a city's "City of" or "City" (Makati, Cebu City). Many places share a name (nine San
// Joses nationally): those are listed with their province, so a pick says which one it is.

const SPELLINGS = new Map([
  ['sto', 'santo'],
  ['sta', 'santa'],
  ['gen', 'general'],
  ['prov', 'province'],
]);
const NOT_A_PROVINCE = /\s*\(\s*not\s+a\s+province\s*\)\s*$/i;

/**
 * The words of a name, as written or typed, without what a reader would not type: the feed's own
 * rule (words() in src/boundaries/placeNames.ts; cityBase() there for withoutCity() here), here
 * again since the page has no build step; test/unit/explorerPlaceNames.test.ts keeps the two
 * agreeing on every national city.
 */
function words(text) {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/['\u2018\u2019\u02bc`]/g, '')
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w !== '')
    .map((w) => SPELLINGS.get(w) ?? w);
}

/** A name's words without a city marker ("City of X", "Science City of X", "X City"), and whether there was one (the feed's cityBase()). */
function withoutCity(w) {
  for (let i = w.length - 3; i >= 0; i--) {
    if (w[i] === 'city' && w[i + 1] === 'of') return { base: w.slice(i + 2), marked: true };
  }
  if (w.length > 1 && w[w.length - 1] === 'city') return { base: w.slice(0, -1), marked: true };
  return { base: w, marked: false };
}

/**
 * The places as listed: `places` ({ level, code, name, province? } in the order shown), each
 * with a `label` no other has, and the keys `findPlace` matches. `provinceName(code)` names a
 * city's province.
 */
export function listPlaces(places, provinceName) {
  const key = (p) => words(p.name).join(' ');
  const shared = new Map();
  for (const p of places) shared.set(key(p), (shared.get(key(p)) ?? 0) + 1);
  const labelOf = (p) => {
    if (shared.get(key(p)) === 1) return p.name;
    const province = p.level === 'city' && p.province ? provinceName(p.province)?.replace(NOT_A_PROVINCE, '') : undefined;
    return `${p.name} (${province ?? p.level})`;
  };
  const labels = places.map(labelOf);
  const taken = new Map();
  for (const l of labels) taken.set(l, (taken.get(l) ?? 0) + 1);
  return places.map((p, i) => {
    // Two of one name in one province: their codes too.
    const label = taken.get(labels[i]) > 1 ? `${labels[i].slice(0, -1)}, ${p.code})` : labels[i];
    const w = words(p.name);
    const { base, marked } = withoutCity(w);
    return { place: p, label, labelKey: words(label).join(' '), full: w.join(' '), base: base.join(' '), cityMarked: p.level === 'city' && marked };
  });
}

/** The listed place `typed` names: its label, its name, its name without "City", else the first label or name it begins or is part of. */
export function findPlace(listed, typed) {
  const w = words(typed);
  if (w.length === 0) return undefined;
  const text = w.join(' ');
  const { base, marked } = withoutCity(w);
  const b = base.join(' ');
  // "Cebu City" is the city, not the province of Cebu; "Santiago City" the city, not a municipality named Santiago.
  const cityIfMarked = (e) => !marked || e.place.level === 'city';
  return (
    listed.find((e) => e.labelKey === text) ??
    listed.find((e) => e.full === text) ??
    (marked ? listed.find((e) => e.base === b && e.cityMarked) : undefined) ??
    listed.find((e) => e.base === b && cityIfMarked(e)) ??
    listed.find((e) => e.labelKey.startsWith(text)) ??
    listed.find((e) => e.base.startsWith(b) && cityIfMarked(e)) ??
    listed.find((e) => e.full.includes(text))
  )?.place;
}
