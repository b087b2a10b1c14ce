// The map's areas: the boundary version's levels, each drawn at the zooms it reads at, and a
// choropleth of the window's reports at the level in view. Nationally the map opens on the 17
// regions (about 0.1 MB, simplified for that zoom by the service: /cities/outlines), provinces
// follow at zoom 7, cities and municipalities at 9, and from 11 the barangays of the cities in
// view, fetched per city. The two-city default draws its cities and every barangay at once.
// Counts come from /reports/archive/stats by the level shown, asked once per window and level.

import { areasKeptFor, KeptAreas } from './keptAreas.js';
import { findPlace, listPlaces } from './placeNames.js';

/** A level, what the stats call it, the zoom it is drawn below (nationally), and its name in the legend. */
const LEVELS = [
  { level: 'region', below: 7, noun: 'region' },
  { level: 'province', below: 9, noun: 'province' },
  { level: 'city', below: 11, noun: 'city or municipality' },
  { level: 'local_area', below: Infinity, noun: 'barangay' },
];
const COLORS = ['#ffffcc', '#c7e9b4', '#7fcdbb', '#41b6c4', '#2c7fb8', '#253494'];
/** At most this many areas are listed in the table of counts, the busiest first. */
const TABLE_ROWS = 100;
/** Up to this many cities (the two-city default) every barangay is drawn at once. */
const ALL_AREAS_UP_TO = 50;
/** At most this many cities' barangays are asked for at a time (a view at zoom 11 holds a few dozen). */
const CITIES_IN_VIEW = 40;

/** A span holding `text` as text (never parsed as markup). */
export function textElement(text) {
  const span = document.createElement('span');
  span.textContent = text;
  return span;
}

/**
 * Takes an area's shape out of the Tab order: its tooltip's focus listeners make a browser stop
 * on each of thousands of shapes, most out of view. The keyboard has the place list and search.
 */
function outOfTabOrder(layer) {
  layer.on('add', () => layer.getElement()?.setAttribute('tabindex', '-1'));
}

/** Five classes over the counts (quantiles of the non-zero ones). */
function classesOf(counts) {
  const values = [...counts].filter((n) => n > 0).sort((a, b) => a - b);
  if (values.length === 0) return [];
  const breaks = [];
  for (let i = 1; i <= 5; i++) {
    const v = values[Math.min(values.length - 1, Math.ceil((values.length * i) / 5) - 1)];
    if (breaks.length === 0 || v > breaks[breaks.length - 1]) breaks.push(v);
  }
  let low = 1;
  return breaks.map((high, i) => {
    const c = { low, high, color: COLORS[i + (COLORS.length - breaks.length)] };
    low = high + 1;
    return c;
  });
}


/**
 * The areas of `map`. `api(path)` fetches JSON from the service; `onError(message)` reports a
 * failure of something loaded in the background.
 */
export function createAreas({ map, api, mapEl, legendEl, areaTable, placeNote, adminSelect, placeSearch, placeList, label, onError }) {
  /** level → { layer (L.GeoJSON), features } once loaded; local_area's layer fills as cities are fetched. */
  const layers = new Map();
  /** Barangay PSGC → { name, city }, city code → name: for the reports' popups. */
  const areaNames = new Map();
  const cityNames = new Map();
  const citiesWithAreas = new Set();
  /** The cities whose barangays are drawn, those seen longest ago dropped beyond what the device's memory allows (keptAreas.js). */
  const kept = new KeptAreas(areasKeptFor(navigator.deviceMemory));
  /** While a city's barangays are drawn: their layers. */
  let drawing;
  /** The cities whose barangays the latest view asked for. */
  let inViewNow = [];
  /** The places listed and searched (placeNames.js). */
  let listed = [];
  let national = false;
  /** The current boundaries' attribution on the map (HTML of its text). */
  let attribution;
  /** Whether the map's moves redraw the level in view (set once, however often the levels load). */
  let following = false;
  let shown;
  /** The window's counts by level (a Map key → count), for the window `countsFor` last asked. */
  let counts = new Map();
  /** level → the pending request of its counts, for the current window. */
  let asked = new Map();
  let countsKey;
  let fetchCounts;
  let painted = false;
  /**
   * The boundary version the levels gave: every later boundary request names it, so a map whose
   * loading a publish interrupts is drawn from one version, never parts of two.
   */
  let version;
  const pinned = (path) => `${path}${path.includes('?') ? '&' : '?'}version=${encodeURIComponent(version)}`;

  const outlineStyle = (level) => ({
    region: { color: '#1b2631', weight: 1.2 },
    province: { color: '#34495e', weight: 0.9 },
    city: { color: '#1b2631', weight: national ? 0.6 : 2 },
  })[level];

  function addLayer(level, collection) {
    // Loaded again (after a level failed to load): the layers drawn before give way.
    for (const name of level === 'city' ? [level, 'city-line'] : [level]) layers.get(name)?.layer.remove();
    const layer = L.geoJSON(collection, {
      style: () => ({ ...outlineStyle(level), fillOpacity: 0 }),
      onEachFeature: (f, sub) => {
        sub.options.className = `${level} ${level}-${f.properties.code}`;
        outOfTabOrder(sub);
        sub.bindTooltip(() => textElement(`${f.properties.name}: ${sub.count ?? 0} report${sub.count === 1 ? '' : 's'}`), { sticky: true });
        // A click on an area zooms the map to it (and so to the next level down).
        sub.on('click', () => map.fitBounds(sub.getBounds(), { padding: [10, 10] }));
      },
    });
    layers.set(level, { layer, features: collection.features });
    if (level === 'city') {
      for (const f of collection.features) cityNames.set(f.properties.code, f.properties.name);
      // Over the barangays, the cities as lines alone: they must not take the barangays' tooltips.
      const lines = L.geoJSON(collection, { style: (f) => ({ ...outlineStyle('city'), fill: false, className: `city-line city-line-${f.properties.code}` }), interactive: false });
      layers.set('city-line', { layer: lines, features: collection.features });
    }
    return layer;
  }

  // The barangays: filled by count, names in tooltips; filled in as their cities are fetched.
  const areasLayer = L.geoJSON({ type: 'FeatureCollection', features: [] }, {
    style: { color: '#7f8c8d', weight: 0.6, fillOpacity: 0 },
    onEachFeature: (f, sub) => {
      sub.options.className = `area area-${f.properties.psgc}`;
      outOfTabOrder(sub);
      sub.bindTooltip(() => textElement(`${f.properties.name}: ${sub.count ?? 0} report${sub.count === 1 ? '' : 's'}`), { sticky: true });
      drawing?.push(sub);
    },
  });
  layers.set('local_area', { layer: areasLayer, features: [] });

  /** Fetches and draws the barangays of these cities (each once); how many were drawn. */
  async function addAreas(codes) {
    const todo = codes.filter((code) => !citiesWithAreas.has(code));
    for (const code of todo) citiesWithAreas.add(code);
    const answers = await Promise.allSettled(todo.map((code) => api(pinned(`/cities/${encodeURIComponent(code)}/local-areas?geoformat=geojson`))));
    // A city whose barangays could not be fetched is asked for again next time.
    answers.forEach((a, i) => a.status === 'rejected' && citiesWithAreas.delete(todo[i]));
    const failed = answers.find((a) => a.status === 'rejected');
    const features = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value.result.features : []));
    for (const f of features) areaNames.set(f.properties.psgc, { name: f.properties.name, city: f.properties.city_code });
    answers.forEach((a, i) => {
      if (a.status !== 'fulfilled') return;
      drawing = [];
      areasLayer.addData(a.value.result);
      kept.add(todo[i], drawing);
      drawing = undefined;
    });
    mapEl.dataset.areas = String(areaNames.size);
    if (features.length > 0 && shown === 'local_area') paint();
    if (failed) throw failed.reason;
    return features.length;
  }

  /** The level to show at this zoom: nationally by zoom; the two-city default always its barangays. */
  function levelAt(zoom) {
    if (!national) return 'local_area';
    // Of the levels loaded so far (barangays need the cities, to know which are in view), the first drawn at this zoom, else the finest.
    const loaded = LEVELS.filter((l) => layers.has(l.level === 'local_area' ? 'city' : l.level));
    return (loaded.find((l) => zoom < l.below) ?? loaded[loaded.length - 1]).level;
  }

  /** Puts the layers of the level in view on the map (and city outlines over barangays), then its counts. */
  async function show() {
    const level = levelAt(map.getZoom());
    const changed = level !== shown;
    shown = level;
    mapEl.dataset.level = level;
    for (const [name, { layer }] of layers) {
      const wanted = name === level || (name === 'city-line' && level === 'local_area');
      if (wanted && !map.hasLayer(layer)) layer.addTo(map);
      if (!wanted && map.hasLayer(layer)) layer.remove();
    }
    layers.get('city-line')?.layer.bringToFront();
    if (level === 'local_area' && national) await inView();
    if (changed) await refresh();
  }

  /** The barangays of the cities in view (at most a few dozen at a time, those nearest the centre first). */
  async function inView() {
    const view = map.getBounds();
    const centre = view.getCenter();
    const near = [];
    layers.get('city')?.layer.eachLayer((sub) => {
      const bounds = sub.getBounds();
      if (view.intersects(bounds)) near.push({ code: sub.feature.properties.code, d: bounds.contains(centre) ? 0 : centre.distanceTo(bounds.getCenter()) });
    });
    near.sort((a, b) => a.d - b.d);
    const codes = near.slice(0, CITIES_IN_VIEW).map((n) => n.code);
    inViewNow = codes;
    kept.seen(codes);
    await addAreas(codes);
    // Those seen longest ago go beyond the limit (a long visit stays within a phone's memory),
    // never those of the view now: a move's fetch may end after the map has moved on.
    kept.seen(inViewNow);
    const dropped = kept.dropBeyondLimit(new Set(inViewNow));
    for (const { city, areas } of dropped) {
      for (const sub of areas) {
        areasLayer.removeLayer(sub);
        areaNames.delete(sub.feature.properties.psgc);
      }
      citiesWithAreas.delete(city);
    }
    mapEl.dataset.areas = String(areaNames.size);
    // The table of counts lists only what is drawn.
    if (dropped.length > 0 && shown === 'local_area' && counts.has(shown)) paint();
  }

  /** The counts of the level shown for the current window, asked once per window and level. */
  async function refresh() {
    if (!fetchCounts || !shown) return;
    const level = shown;
    if (!counts.has(level)) {
      // One request per window and level, however many moves ask meanwhile.
      const key = countsKey;
      if (!asked.has(level)) asked.set(level, fetchCounts(level));
      const byKey = await asked.get(level);
      if (key !== countsKey) return;
      counts.set(level, byKey);
    }
    if (level === shown) paint();
  }

  function paint() {
    const level = shown;
    const byKey = counts.get(level) ?? new Map();
    const entry = layers.get(level);
    const classes = classesOf(byKey.values());
    let filled = 0;
    entry?.layer.eachLayer((sub) => {
      const p = sub.feature.properties;
      const n = byKey.get(level === 'local_area' ? p.psgc : p.code) ?? 0;
      sub.count = n;
      const cls = classes.find((c) => n >= c.low && n <= c.high);
      sub.setStyle(cls ? { fillColor: cls.color, fillOpacity: 0.75 } : { fillOpacity: 0 });
      const el = sub.getElement?.();
      if (el) el.dataset.count = String(n);
      if (cls) filled += 1;
    });
    legendEl.replaceChildren(
      ...classes.map((c) => {
        const item = document.createElement('span');
        const swatch = document.createElement('span');
        swatch.className = 'swatch';
        swatch.style.background = c.color;
        item.append(swatch, c.low === c.high ? `${c.low}` : `${c.low}–${c.high}`);
        return item;
      }),
    );
    if (classes.length > 0) legendEl.prepend(Object.assign(document.createElement('span'), { textContent: `Reports per ${LEVELS.find((l) => l.level === level).noun}:` }));
    fillTable(level, entry, counts.has(level));
    mapEl.dataset.filled = String(filled);
    if (!painted && fetchCounts) {
      painted = true;
      performance.mark('explorer:map-painted');
    }
  }

  /**
   * The counts drawn, as a table (the busiest areas first): what the fills say, for readers who
   * cannot tell the colours apart and for screen readers.
   */
  function fillTable(level, entry, known) {
    const rows = [];
    entry?.layer.eachLayer((sub) => {
      if (known && sub.count > 0) rows.push({ name: areaLabel(level, sub.feature.properties), count: sub.count });
    });
    rows.sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
    const noun = LEVELS.find((l) => l.level === level).noun;
    const [caption, body] = [areaTable.querySelector('caption'), areaTable.querySelector('tbody')];
    // Nationally the barangays are those of the cities seen lately (keptAreas.js), not only those in view.
    const which = level === 'local_area' && national ? ' loaded (the cities seen lately)' : '';
    caption.textContent = !known ? "The window's counts are not loaded." : rows.length === 0 ? `No ${noun}${which} has reports in this window.` : `Reports per ${noun}${which}, the busiest first`;
    body.replaceChildren(
      ...rows.slice(0, TABLE_ROWS).map((r) => {
        const tr = document.createElement('tr');
        for (const text of [r.name, r.count.toLocaleString('en')]) tr.append(Object.assign(document.createElement('td'), { textContent: text }));
        return tr;
      }),
    );
    const more = rows.length - TABLE_ROWS;
    areaTable.querySelector('.note').textContent = more > 0 ? `And ${more.toLocaleString('en')} more with fewer reports; the downloads give every report with its areas.` : '';
  }

  /** An area's name as the table gives it: a barangay's with its city, since names repeat across cities. */
  function areaLabel(level, p) {
    if (level !== 'local_area') return p.name;
    const city = cityNames.get(p.city_code);
    return city ? `${p.name}, ${city}` : p.name;
  }

  /** The admin list and the place search, from every level loaded. */
  function fillLists() {
    const groups = [
      ['region', 'Regions'],
      ['province', 'Provinces'],
      ['city', national ? 'Cities and municipalities' : 'Cities'],
    ].filter(([level]) => layers.has(level));
    const provinceNames = new Map((layers.get('province')?.features ?? []).map((f) => [f.properties.code, f.properties.name]));
    listed = listPlaces(
      groups.flatMap(([level]) => layers.get(level).features.map((f) => ({ level, ...f.properties }))),
      (code) => provinceNames.get(code),
    );
    const kept = adminSelect.value;
    adminSelect.replaceChildren(new Option(national ? 'The whole country' : 'All cities', ''));
    for (const [level, title] of groups) {
      const group = document.createElement('optgroup');
      group.label = title;
      group.append(...listed.filter((e) => e.place.level === level).map((e) => new Option(e.label, e.place.code)));
      adminSelect.append(group);
    }
    adminSelect.value = kept;
    placeList.replaceChildren(...listed.map((e) => new Option(e.label, e.label)));
  }

  /** The place found, about to be said (a later search replaces it). */
  let placeSaying;
  placeSearch.addEventListener('submit', (e) => {
    e.preventDefault();
    clearTimeout(placeSaying);
    const typed = placeSearch.elements.place.value;
    if (typed.trim() === '') return;
    const place = findPlace(listed, typed);
    let found;
    layers.get(place?.level)?.layer.eachLayer((sub) => {
      if (sub.feature.properties.code === place.code) found = sub;
    });
    // Said in the search's own live region: the map's move alone tells a screen reader nothing.
    if (!found) {
      placeNote.textContent = `No place named “${typed}” in the current boundaries.`;
      return;
    }
    // Emptied first: the same place found again is said again.
    placeNote.textContent = '';
    const said = `The map shows ${listed.find((e) => e.place === place)?.label ?? place.name}.`;
    placeSaying = setTimeout(() => {
      placeNote.textContent = said;
    }, 50);
    // One move to the zoom that shows it whole, a city close enough for its barangays to be drawn:
    // a fit and then a zoom would leave the map at the old centre (the fit is still animating).
    const bounds = found.getBounds();
    const fit = map.getBoundsZoom(bounds, false, L.point(20, 20));
    map.setView(bounds.getCenter(), Math.min(14, place.level === 'city' ? Math.max(11, fit) : fit));
  });

  const outlines = async (level) => {
    const topo = (await api(pinned(`/cities/outlines?level=${level}`))).result;
    return topojson.feature(topo, topo.objects.output);
  };

  return {
    /**
     * Loads the version's levels and draws the first. `rest` settles once every level is loaded
     * (and the admin list and the place search filled): the window's counts need not wait for it.
     * `version` is the boundary version drawn, for the window's requests to name.
     */
    async load() {
      const { levels, label: versionLabel, attribution: credit, version: levelsVersion } = (await api(version ? pinned('/cities/levels') : '/cities/levels')).result;
      // Loaded again after a failure: still the version the map has begun to draw.
      version = levelsVersion;
      // The boundaries' makers, acknowledged where they are shown (as text: Leaflet takes HTML).
      const html = credit ? textElement(credit).innerHTML : undefined;
      if (html !== attribution) {
        if (attribution) map.attributionControl.removeAttribution(attribution);
        attribution = html;
        if (attribution) map.attributionControl.addAttribution(attribution);
      }
      const has = (level) => levels.some((l) => l.level === level);
      const cityCount = levels.find((l) => l.level === 'city')?.count ?? 0;
      national = has('region') || cityCount > ALL_AREAS_UP_TO;
      if (!national) {
        // Few cities: their full outlines, and every barangay at once.
        const cities = (await api(pinned('/cities?geoformat=geojson'))).result;
        addLayer('city', cities);
        map.fitBounds(layers.get('city').layer.getBounds(), { padding: [10, 10], animate: false });
        await addAreas(cities.features.map((f) => f.properties.code));
        label.textContent = `${cities.features.length} cities, ${areaNames.size} barangays`;
        fillLists();
        await show();
        return { rest: Promise.resolve(), version };
      }
      // The country: the first level drawn now, the others (and the lists) behind it.
      const order = LEVELS.filter((l) => has(l.level)).map((l) => l.level);
      const rest = order.slice(1).map((level) => outlines(level).then((fc) => ({ level, fc })));
      for (const p of rest) p.catch(() => {});
      addLayer(order[0], await outlines(order[0]));
      map.fitBounds(layers.get(order[0]).layer.getBounds(), { padding: [10, 10], animate: false });
      const plural = { region: 'regions', province: 'provinces', city: 'cities and municipalities' };
      label.textContent = `${versionLabel}: ${levels.map((l) => `${l.count.toLocaleString('en')} ${plural[l.level]}`).join(', ')}; barangays drawn when you zoom in`;
      if (!following) {
        following = true;
        map.on('zoomend moveend', () => show().catch((err) => onError(`The map could not be drawn: ${err.message}`)));
      }
      await show();
      const loaded = (async () => {
        for (const p of rest) {
          const { level, fc } = await p;
          addLayer(level, fc);
        }
        fillLists();
        await show();
      })();
      return { rest: loaded, version };
    },
    /** A new window: `fetch(level)` gives its counts by that level (a Map key → count); drawn at the level in view. */
    async setWindow(key, fetch) {
      countsKey = key;
      fetchCounts = fetch;
      counts = new Map();
      asked = new Map();
      await refresh();
    },
    /** The window's counts at no level (nothing could be loaded). */
    clear() {
      counts = new Map();
      if (shown) paint();
    },
    cityName: (code) => cityNames.get(code),
    areaName: (psgc) => areaNames.get(psgc),
  };
}
