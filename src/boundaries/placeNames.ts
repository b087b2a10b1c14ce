/**
 * Resolves what a partner typed in `partner_city` to one city/municipality or province of a boundary
 * version, and gives the canonical label to store.
 *
 * Rules:
 * - Normalised comparison: NFD with combining marks stripped (Peñarrubia = Penarrubia), lower case,
 *   apostrophes dropped (T'Boli = TBoli), all other punctuation and whitespace ignored
 *   (Lapu-Lapu = Lapu Lapu = Lapulapu), and Sto./Sta./Gen./Prov. read as Santo/Santa/General/Province.
 * - A city's base name drops its "City of …" / "… City" marker (also "Science City of Muñoz" → Muñoz).
 *   - Input with a city marker ("Quezon City", "Cebu City", "City of San Jose"): a single exact
 *     official-name match wins; otherwise the cities with that base whose official name carries a
 *     city marker (any city/municipality with that base if none does). Provinces never match.
 *   - Input with a province marker ("Province of Quezon", "Quezon Province", "Quezon (province)"):
 *     a single exact official-name match wins ("Mountain Province"); otherwise provinces only.
 *   - A bare name ("San Fernando", "Naga", "Quezon", "Cebu"): every place whose official name or base
 *     name it is. So "City of X", "X City" and "X" meet, and a province named like a city or
 *     municipality is ambiguous until qualified.
 * - "Name, Qualifier" narrows a name: the qualifier is the place's province (a trailing
 *   "(Not a Province)" is optional; "NCR, …" districts also answer to "NCR" and "Metro Manila") or its
 *   code. The whole input is tried as a name first, so province names with commas still match.
 *   A place's code alone also resolves.
 * - One candidate: ok. Several: `ambiguous`, suggesting their labels (provinces, then places whose
 *   name carries a city marker, then the rest; alphabetical within). A name that exists but not in
 *   the given province: `unknown`, suggesting that name's places, closest province first. Nothing:
 *   `unknown`, suggesting up to 5 places closest by edit distance (optimal string alignment, so a
 *   swapped pair of letters costs 1) over their name, base name, city/province forms and label,
 *   leaving out any more than 3 edits worse than the best.
 * - Label: the official name when it resolves to the place alone; else "Name (province)" for a
 *   province, "Name, Province" for a city/municipality; else "Name, CODE"; else the code.
 *   Every label resolves back to its place (checked when the index is built).
 * - Inputs longer than 200 characters are `unknown` with no suggestions. Codes must be unique.
 */

import type { BoundarySet } from './types.js';
import { areaCode } from './hierarchy.js';

export type PlaceLevel = 'city' | 'province';
export interface Place {
  /** The code the service tags with (e.g. 'PH-QC', 'PH-1381300000', or a province's code). */
  code: string;
  /** The official name, e.g. 'Quezon City', 'City of San Fernando', 'San Jose'. */
  name: string;
  level: PlaceLevel;
  /** For a city/municipality: the name of its province, when it has one (used to disambiguate). */
  province?: string | undefined;
}
export type Resolution =
  | {
      ok: true;
      place: Place;
      /** canonical label to store: the name, or "Name, Province" where the name alone is ambiguous */
      label: string;
    }
  | {
      ok: false;
      reason: 'unknown' | 'ambiguous';
      /** labels a person could send instead, best first: every place an ambiguous name may mean (up to MAX_MEANINGS), up to 5 otherwise */
      suggestions: string[];
    };

const MAX_INPUT = 200;
const MAX_SUGGESTIONS = 5;
/** The places an ambiguous name may mean, all listed (San Jose means ten nationally): each partner must find its own. */
const MAX_MEANINGS = 50;
/** Suggestions farther than this many edits are not worth showing. */
const MAX_DISTANCE = 64;
/** Suggestions more than this many edits worse than the best one are noise. */
const SPREAD = 3;
/** Commas tried as the name/qualifier split (labels need at most 3). */
const MAX_SPLITS = 4;
const SPELLINGS = new Map([
  ['sto', 'santo'],
  ['sta', 'santa'],
  ['gen', 'general'],
  ['prov', 'province'],
]);
const NOT_A_PROVINCE = /\s*\(\s*not\s+a\s+province\s*\)\s*$/i;

/** The normalised words of a name. */
function words(text: string): string[] {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/['\u2018\u2019\u02bc`]/g, '')
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w !== '')
    .map((w) => SPELLINGS.get(w) ?? w);
}
const key = (w: readonly string[]): string => w.join('');

/** The base name without a city marker, and whether there was one. */
function cityBase(w: readonly string[]): { base: string[]; marked: boolean } {
  for (let i = w.length - 3; i >= 0; i--) {
    if (w[i] === 'city' && w[i + 1] === 'of') return { base: w.slice(i + 2), marked: true };
  }
  if (w.length > 1 && w[w.length - 1] === 'city') return { base: w.slice(0, -1), marked: true };
  return { base: [...w], marked: false };
}

/** The name inside a province marker ("province of X", "X province"), or undefined. */
function provinceBase(w: readonly string[]): string[] | undefined {
  if (w.length > 2 && w[0] === 'province' && w[1] === 'of') return w.slice(2);
  if (w.length > 1 && w[w.length - 1] === 'province' && w[w.length - 2] !== 'a') return w.slice(0, -1);
  return undefined;
}

interface Entry {
  place: Place;
  full: string;
  base: string;
  cityMarked: boolean;
  /** Keys a qualifier may take to select this place: its province's forms and its code. */
  qualifiers: Set<string>;
  /** The province as shown in labels (without "(Not a Province)"), spaced normalised form too. */
  provinceShown: string | undefined;
  provinceWords: string;
  label: string;
  /** Position in suggestion order. */
  order: number;
}

interface Variant {
  text: string;
  letters: Uint8Array;
  entries: Entry[];
}

type Found = { kind: 'hit'; entries: Entry[] } | { kind: 'elsewhere'; entries: Entry[] } | { kind: 'none' };

const collator = new Intl.Collator('en');

export class PlaceNames {
  private readonly entries: Entry[];
  private readonly byFull = new Map<string, Entry[]>();
  private readonly byBase = new Map<string, Entry[]>();
  private readonly provinces = new Map<string, Entry[]>();
  private readonly byCode = new Map<string, Entry>();
  /** Distinct spaced forms (name, base, city/province forms, label) and their places, by length. */
  private readonly variants: Variant[][] = [];
  private readonly sortedLabels: string[];

  /** The places it was made from (a thread of its own makes the same index from them). */
  get places(): Place[] {
    return this.entries.map((e) => e.place);
  }

  constructor(places: readonly Place[]) {
    this.entries = places.map((place) => this.index(place));
    for (const e of this.entries) e.label = this.labelFor(e);
    const ranked = [...this.entries].sort(
      (a, b) => rank(a) - rank(b) || collator.compare(a.label, b.label) || collator.compare(a.place.code, b.place.code),
    );
    ranked.forEach((e, i) => (e.order = i));
    this.sortedLabels = ranked.map((e) => e.label).sort(collator.compare);

    const variants = new Map<string, Set<Entry>>();
    const add = (text: string, e: Entry): void => {
      if (text === '') return;
      const set = variants.get(text) ?? new Set<Entry>();
      set.add(e);
      variants.set(text, set);
    };
    for (const e of ranked) {
      const w = words(e.place.name);
      add(w.join(' '), e);
      add(words(e.label).join(' '), e);
      if (e.place.level === 'city') {
        const { base, marked } = cityBase(w);
        const b = base.join(' ');
        add(b, e);
        if (marked) {
          add(`${b} city`, e);
          add(`city of ${b}`, e);
        }
      } else {
        const b = words(e.place.name.replace(NOT_A_PROVINCE, ''));
        add(b.join(' '), e);
        add((provinceBase(b) ?? []).join(' '), e);
      }
    }
    for (const [text, set] of variants) {
      const bucket = (this.variants[text.length] ??= []);
      bucket.push({ text, letters: letterCounts(text), entries: [...set] });
    }
  }

  resolve(input: string): Resolution {
    const found = this.find(input);
    if (found.kind === 'hit' && found.entries.length === 1) {
      const e = found.entries[0]!;
      return { ok: true, place: e.place, label: e.label };
    }
    if (found.kind === 'hit') return { ok: false, reason: 'ambiguous', suggestions: labelsOf(found.entries, MAX_MEANINGS) };
    if (found.kind === 'elsewhere') return { ok: false, reason: 'unknown', suggestions: labelsOf(found.entries) };
    return { ok: false, reason: 'unknown', suggestions: this.closest(input) };
  }

  /** Every label accepted as canonical (for docs/error messages), sorted. */
  labels(): string[] {
    return [...this.sortedLabels];
  }

  private index(place: Place): Entry {
    const w = words(place.name);
    const city = place.level === 'city' ? cityBase(w) : { base: words(place.name.replace(NOT_A_PROVINCE, '')), marked: false };
    const shown = place.level === 'city' && place.province ? place.province.replace(NOT_A_PROVINCE, '') : undefined;
    const e: Entry = {
      place,
      full: key(w),
      base: key(city.base),
      cityMarked: city.marked,
      qualifiers: new Set([key(words(place.code))]),
      provinceShown: shown,
      provinceWords: shown === undefined ? '' : words(shown).join(' '),
      label: '',
      order: 0,
    };
    if (place.level === 'city' && place.province) {
      const pw = words(shown!);
      e.qualifiers.add(key(words(place.province)));
      e.qualifiers.add(key(pw));
      const stripped = provinceBase(pw);
      if (stripped) e.qualifiers.add(key(stripped));
      if (pw[0] === 'ncr') {
        e.qualifiers.add('ncr');
        e.qualifiers.add('metromanila');
      }
    }
    const code = key(words(place.code));
    if (code === '' || this.byCode.has(code)) throw new Error(`place codes must be unique and non-empty: ${JSON.stringify(place.code)}`);
    this.byCode.set(code, e);
    push(this.byFull, e.full, e);
    if (e.base !== e.full) push(this.byBase, e.base, e);
    push(this.byBase, e.full, e);
    if (place.level === 'province') {
      push(this.provinces, e.full, e);
      if (e.base !== e.full) push(this.provinces, e.base, e);
    }
    return e;
  }

  /** The first of the official name, a qualified name, and the code that resolves to the place alone. */
  private labelFor(e: Entry): string {
    const { name, code, level } = e.place;
    const options: string[] = [];
    if (e.full !== '') {
      options.push(name);
      if (level === 'province') options.push(`${name} (province)`);
      else if (e.provinceShown) options.push(`${name}, ${e.provinceShown}`);
      options.push(`${name}, ${code}`);
    }
    options.push(code);
    for (const label of options) {
      const found = this.find(label);
      if (found.kind === 'hit' && found.entries.length === 1 && found.entries[0] === e) return label;
    }
    throw new Error(`no label resolves to place ${JSON.stringify(code)}`);
  }

  private find(input: string): Found {
    if (input.length > MAX_INPUT) return { kind: 'none' };
    const whole = this.lookup(input);
    if (whole.length > 0) return { kind: 'hit', entries: whole };

    let named: { entries: Entry[]; qualifier: string } | undefined;
    let comma = -1;
    for (let split = 0; split < MAX_SPLITS; split++) {
      comma = input.indexOf(',', comma + 1);
      if (comma < 0) break;
      const candidates = this.lookup(input.slice(0, comma));
      if (candidates.length === 0) continue;
      const qw = words(input.slice(comma + 1));
      const keys = [key(qw)];
      const stripped = provinceBase(qw);
      if (stripped) keys.push(key(stripped));
      const matched = candidates.filter((e) => keys.some((k) => e.qualifiers.has(k)));
      if (matched.length > 0) return { kind: 'hit', entries: matched };
      named ??= { entries: candidates, qualifier: qw.join(' ') };
    }
    if (named) {
      const q = named.qualifier;
      const scored = named.entries.map((e) => ({ e, d: distance(q, e.provinceWords, MAX_DISTANCE) }));
      scored.sort((a, b) => a.d - b.d || a.e.order - b.e.order);
      return { kind: 'elsewhere', entries: scored.map((s) => s.e) };
    }
    const code = this.byCode.get(key(words(input)));
    return code ? { kind: 'hit', entries: [code] } : { kind: 'none' };
  }

  /** The places a name (no qualifier) denotes, in suggestion order. */
  private lookup(text: string): Entry[] {
    const w = words(text);
    if (w.length === 0) return [];
    const exact = this.byFull.get(key(w)) ?? [];
    const province = provinceBase(w);
    const city = cityBase(w);
    if ((province || city.marked) && exact.length === 1) return exact;
    let more: Entry[];
    if (province) {
      more = this.provinces.get(key(province)) ?? [];
    } else if (city.marked) {
      const cities = (this.byBase.get(key(city.base)) ?? []).filter((e) => e.place.level === 'city');
      const marked = cities.filter((e) => e.cityMarked);
      more = marked.length > 0 ? marked : cities;
    } else {
      more = this.byBase.get(key(w)) ?? [];
    }
    const all = new Set([...exact, ...more]);
    return [...all].sort((a, b) => a.order - b.order);
  }

  /** The labels of the places closest to the input by edit distance, best first. */
  private closest(input: string): string[] {
    if (input.length > MAX_INPUT) return [];
    const w = words(input);
    if (w.length === 0) return [];
    const queries = new Set([w.join(' ')]);
    const city = cityBase(w);
    if (city.marked) queries.add(city.base.join(' '));
    const province = provinceBase(w);
    if (province) queries.add(province.join(' '));

    // best distance per place; `counts[d]` places are at distance d, so `limit` is the distance
    // within which at least MAX_SUGGESTIONS places already lie, or SPREAD more than the best so far:
    // anything farther is not shown.
    // Forms are visited from the query's length outwards, so the limit falls early.
    const best = new Map<Entry, number>();
    const counts = new Array<number>(MAX_DISTANCE + 2).fill(0);
    let limit = MAX_DISTANCE;
    const consider = (q: string, qLetters: Uint8Array, v: Variant): void => {
      if (letterBound(qLetters, v.letters) > limit) return;
      const d = distance(q, v.text, limit);
      if (d > limit) return;
      let changed = false;
      for (const e of v.entries) {
        const old = best.get(e);
        if (old !== undefined && old <= d) continue;
        if (old !== undefined) counts[old]!--;
        counts[d]!++;
        best.set(e, d);
        changed = true;
      }
      if (!changed) return;
      limit = Math.min(limit, d + SPREAD);
      for (let n = 0, k = 0; k < limit; k++) {
        n += counts[k]!;
        if (n >= MAX_SUGGESTIONS) {
          limit = k;
          break;
        }
      }
    };
    for (const q of queries) {
      const qLetters = letterCounts(q);
      for (let delta = 0; delta <= limit; delta++) {
        for (const v of this.variants[q.length - delta] ?? []) consider(q, qLetters, v);
        if (delta > 0) for (const v of this.variants[q.length + delta] ?? []) consider(q, qLetters, v);
        if (q.length - delta < 0 && q.length + delta >= this.variants.length) break;
      }
    }
    return [...best]
      .sort((a, b) => a[1] - b[1] || a[0].order - b[0].order)
      .slice(0, MAX_SUGGESTIONS)
      .map(([e]) => e.label);
  }
}

function rank(e: Entry): number {
  if (e.place.level === 'province') return 0;
  return e.cityMarked ? 1 : 2;
}

function labelsOf(entries: readonly Entry[], most = MAX_SUGGESTIONS): string[] {
  return entries.slice(0, most).map((e) => e.label);
}

function push(map: Map<string, Entry[]>, k: string, e: Entry): void {
  if (k === '') return;
  const list = map.get(k);
  if (list === undefined) map.set(k, [e]);
  else if (!list.includes(e)) list.push(e);
}

/** How often each letter a–z (and, in slot 26, anything else) occurs. */
function letterCounts(text: string): Uint8Array {
  const counts = new Uint8Array(27);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i) - 97;
    const slot = c >= 0 && c < 26 ? c : 26;
    if (counts[slot]! < 255) counts[slot]!++;
  }
  return counts;
}

/** A lower bound of the edit distance: an edit changes the letter counts by at most 2. */
function letterBound(a: Uint8Array, b: Uint8Array): number {
  let diff = 0;
  for (let i = 0; i < 27; i++) diff += Math.abs(a[i]! - b[i]!);
  return Math.ceil(diff / 2);
}

let rowA = new Int32Array(64);
let rowB = new Int32Array(64);
let rowC = new Int32Array(64);

/** Optimal-string-alignment distance (Levenshtein plus adjacent swaps), or max + 1 once above max. */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const n = b.length;
  if (rowA.length <= n) {
    rowA = new Int32Array(n + 1);
    rowB = new Int32Array(n + 1);
    rowC = new Int32Array(n + 1);
  }
  let before = rowA; // row i - 2
  let prev = rowB; // row i - 1
  let cur = rowC; // row i
  for (let j = 0; j <= n; j++) prev[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const ca = a.charCodeAt(i - 1);
    cur[0] = i;
    let rowMin = i;
    for (let j = 1; j <= n; j++) {
      const cb = b.charCodeAt(j - 1);
      let v = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (ca === cb ? 0 : 1));
      if (i > 1 && j > 1 && ca === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === cb) v = Math.min(v, before[j - 2]! + 1);
      cur[j] = v;
      if (v < rowMin) rowMin = v;
    }
    // A row's minimum never falls in later rows (a swap costs no less than the substitution above it).
    if (rowMin > max) return max + 1;
    const spare = before;
    before = prev;
    prev = cur;
    cur = spare;
  }
  return Math.min(prev[n]!, max + 1);
}

/**
 * The places a partner may name in a boundary version: its cities (instance regions) and, in a
 * national version, its provinces, each city with its province's name for disambiguation.
 */
export function placesOf(set: BoundarySet): Place[] {
  const provinces = new Map((set.provinces?.features ?? []).map((f) => [f.properties.psgc, f.properties.name]));
  const cities: Place[] = set.cities.features.map((f) => {
    const province = f.properties.province_psgc ? provinces.get(f.properties.province_psgc) : undefined;
    return { code: f.properties.code, name: f.properties.name, level: 'city', ...(province !== undefined && { province }) };
  });
  const cityCodes = new Set(cities.map((c) => c.code));
  const provinceLevel: Place[] = (set.provinces?.features ?? [])
    .map((f): Place => ({ code: areaCode(f.properties.psgc), name: f.properties.name, level: 'province' }))
    .filter((p) => !cityCodes.has(p.code));
  return [...cities, ...provinceLevel];
}
