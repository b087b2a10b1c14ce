// The explorer: a window picker, a choropleth of the areas in view (areas.js) with the reports as
// points, a time series whose drag narrows the window, and the exact download URLs for the
// window. Everything comes from this service's own endpoints; Leaflet, uPlot and topojson-client
// are loaded before this module by the page (globals L, uPlot and topojson).
import { createAreas } from './areas.js';
import { manilaSplits, manilaValues } from './manilaAxis.js';

const MANILA_MS = 8 * 3_600_000;
const DAY_MS = 86_400_000;
/** Above this many reports the map shows the choropleth alone (the service's EXPLORER_MAX_POINTS). */
const MAX_POINTS = Number(document.querySelector('meta[name="explorer-max-points"]')?.content ?? 20_000);
const SNIPPET_UA = 'my-study/1.0 (you@example.org)';
/**
 * A request whose answer does not begin in this long, or whose body then stops for this long, is
 * given up, and the page says so rather than spin. A large answer still arriving is not.
 */
const REQUEST_MS = 60_000;
/** The archive's first and last instants (1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z). */
const EARLIEST_MS = 0;
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59);
/** The years whose Manila calendar year lies within them: 1970 begins at 16:00 UTC the day before. */
const FIRST_YEAR = 1971;
const LAST_YEAR = 9999;

const form = document.getElementById('window');
const statusEl = document.getElementById('status');
const mapEl = document.getElementById('map');
const mapNote = document.getElementById('map-note');
const legendEl = document.getElementById('legend');
const chartEl = document.getElementById('chart');
const countEl = document.getElementById('download-count');
const linksEl = document.getElementById('download-links');
const snippetLang = document.getElementById('snippet-lang');
const snippetEl = document.getElementById('snippet');

// ---------- errors the page explains ----------

class ServiceDown extends Error {}
class RateLimited extends Error {
  constructor(seconds) {
    super(`Too many requests from this address; try again in ${seconds} s.`);
    this.seconds = seconds;
  }
}
class ApiError extends Error {}

/** JSON of the service; `init`: fetch's further options (a cache mode). */
async function api(path, init = {}) {
  const abort = new AbortController();
  let timer;
  // Restarted at each step: the answer's beginning, then each chunk of its body.
  const waiting = () => {
    clearTimeout(timer);
    timer = setTimeout(() => abort.abort(), REQUEST_MS);
  };
  waiting();
  try {
    return await answerOf(path, { ...init, headers: { Accept: 'application/json' }, signal: abort.signal }, waiting);
  } finally {
    clearTimeout(timer);
  }
}

async function answerOf(path, init, waiting) {
  const { signal } = init;
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    throw signal.aborted ? stalled() : new ServiceDown('The service is not answering; check your connection or try again in a minute.');
  }
  if (res.status === 429) throw new RateLimited(Number(res.headers.get('Retry-After') ?? 60));
  if (res.status >= 500) throw new ServiceDown(`The service answered ${res.status}; try again in a minute.`);
  let text;
  try {
    text = await bodyOf(res, waiting);
  } catch {
    throw signal.aborted ? stalled() : new ServiceDown('The answer was cut off; try again in a minute.');
  }
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  // The boundary version this map was drawn with is no longer served (a publish since).
  if (res.status === 410 && body?.details?.some((d) => d.field === 'version')) {
    throw new ApiError('The boundaries were updated since this map was drawn: reload the page to see them.');
  }
  if (!res.ok) {
    // The problems themselves ("the window may span at most 366 days"), not only that there are some.
    const details = Array.isArray(body?.details) ? body.details.map((d) => (d.field ? `${d.field}: ${d.message}` : d.message)).filter(Boolean) : [];
    throw new ApiError(details.length > 0 ? details.join('; ') : (body?.message ?? `The service answered ${res.status}.`));
  }
  return body;
}

/** The body's text, `waiting()` told of each chunk. */
async function bodyOf(res, waiting) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    waiting();
    text += decoder.decode(value, { stream: true });
  }
}

function stalled() {
  return new ServiceDown(`The service did not answer within ${REQUEST_MS / 1000} s; try again in a minute.`);
}

function setStatus(state, text) {
  statusEl.dataset.state = state;
  statusEl.textContent = text;
}

// ---------- time and the window ----------

/** `2025-06-01T08:00` in Manila time, as the datetime-local inputs use it. */
function manilaLocal(ms) {
  return new Date(ms + MANILA_MS).toISOString().slice(0, 16);
}

/** A datetime-local value (Manila) as ms; undefined unless it is a real time (windowOf checks it is the archive's). */
function fromManilaLocal(value) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value ?? '');
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0));
  // setUTCFullYear, not Date.UTC: that one reads the years 0 to 99 as 1900 to 1999.
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second);
  // No rolling over (a 13th month, a 31st of June, a 25th hour): the time as written, or none.
  const real = d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day && d.getUTCHours() === hour && d.getUTCMinutes() === minute;
  return real ? d.getTime() - MANILA_MS : undefined;
}

/** The archive's bound format with the Manila offset: 2025-06-01T08:00:00+0800. */
function apiInstant(ms) {
  return `${new Date(ms + MANILA_MS).toISOString().slice(0, 19)}+0800`;
}

function formatManila(ms) {
  return `${new Date(ms + MANILA_MS).toISOString().slice(0, 16).replace('T', ' ')} PHT`;
}

function formatUtc(ms) {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** The year it is in Manila now. */
function manilaYear() {
  return new Date(Date.now() + MANILA_MS).getUTCFullYear();
}

/** The page's state, from its URL: w (preset), year, start, end (Manila, custom) and admin. */
function readState(search) {
  const p = new URLSearchParams(search);
  const w = ['24h', '7d', '30d', 'year', 'custom'].includes(p.get('w')) ? p.get('w') : '7d';
  const year = Number(p.get('year')) || manilaYear();
  return { w, year, start: p.get('start') ?? '', end: p.get('end') ?? '', admin: p.get('admin') ?? '' };
}

function stateQuery(state) {
  const p = new URLSearchParams({ w: state.w });
  if (state.w === 'year') p.set('year', String(state.year));
  if (state.w === 'custom') {
    p.set('start', state.start);
    p.set('end', state.end);
  }
  if (state.admin) p.set('admin', state.admin);
  return `?${p}`;
}

/** [startMs, endMs] (end inclusive, to the second) of a state, or an error message. */
function windowOf(state) {
  const now = Math.floor(Date.now() / 1000) * 1000;
  switch (state.w) {
    case '24h':
      return [now - DAY_MS, now];
    case '7d':
      return [now - 7 * DAY_MS, now];
    case '30d':
      return [now - 30 * DAY_MS, now];
    case 'year':
      if (!Number.isInteger(state.year) || state.year < FIRST_YEAR || state.year > LAST_YEAR) return `The year must be a whole number from ${FIRST_YEAR} to ${LAST_YEAR}.`;
      return [Date.UTC(state.year, 0, 1) - MANILA_MS, Date.UTC(state.year + 1, 0, 1) - MANILA_MS - 1000];
    default: {
      const start = fromManilaLocal(state.start);
      const end = fromManilaLocal(state.end);
      if (!state.start || !state.end) return 'Pick both ends of the custom window.';
      // An end to the minute covers its minute; one to the second, its second.
      const last = end === undefined || /:\d\d:\d\d$/.test(state.end) ? end : end + 59_000;
      if (start === undefined || last === undefined || start < EARLIEST_MS || last > LATEST_MS) {
        return "The custom window's ends must be real times from 1970-01-01 08:00 to 9999-12-31 23:59, Manila time.";
      }
      if (end < start) return 'The end of the window is before its start.';
      return [start, last];
    }
  }
}

function windowParams(range, admin) {
  const q = `start=${encodeURIComponent(apiInstant(range[0]))}&end=${encodeURIComponent(apiInstant(range[1]))}`;
  return admin ? `${q}&admin=${encodeURIComponent(admin)}` : q;
}

/** A chart interval that gives a readable number of bars. */
function intervalFor(range) {
  const span = range[1] - range[0];
  if (span <= 3 * DAY_MS) return 'hour';
  if (span <= 120 * DAY_MS) return 'day';
  return 'week';
}

// ---------- the form ----------

/** The query string of the window shown (or being loaded). */
let shownSearch = location.search;

function showState(state) {
  shownSearch = location.search;
  for (const radio of form.elements.w) radio.checked = radio.value === state.w;
  form.elements.year.value = String(state.year);
  const range = windowOf(state);
  form.elements.start.value = state.w === 'custom' ? state.start : Array.isArray(range) ? manilaLocal(range[0]) : '';
  form.elements.end.value = state.w === 'custom' ? state.end : Array.isArray(range) ? manilaLocal(range[1]) : '';
  form.elements.admin.value = state.admin;
  form.elements.admin.dataset.wanted = state.admin;
  showFields(state.w);
}

/**
 * The place chosen: the list's, once it holds the place the window was shown with; until then
 * (its places still loading, or failed to load) that place, not the whole country.
 */
function chosenAdmin() {
  const select = form.elements.admin;
  const wanted = select.dataset.wanted ?? '';
  return [...select.options].some((o) => o.value === wanted) ? select.value : wanted;
}

/**
 * The fields of the chosen preset, the others hidden and disabled: a value the browser calls
 * invalid (a year of a shared link, a time with seconds) in a field out of sight would stop
 * Show without a word. The page itself checks what Show sends (windowOf), and says why.
 */
function showFields(w) {
  form.classList.toggle('custom', w === 'custom');
  form.classList.toggle('year', w === 'year');
  form.elements.year.disabled = w !== 'year';
  form.elements.start.disabled = w !== 'custom';
  form.elements.end.disabled = w !== 'custom';
}

function formState() {
  return {
    w: form.elements.w.value || '7d',
    year: Number(form.elements.year.value) || manilaYear(),
    start: form.elements.start.value,
    end: form.elements.end.value,
    admin: chosenAdmin(),
  };
}

function navigate(state) {
  const query = stateQuery(state);
  if (query !== location.search) history.pushState(null, '', query);
  showState(state);
  load(state);
}

form.addEventListener('change', (e) => {
  if (e.target.name === 'w') showFields(form.elements.w.value);
});
form.addEventListener('submit', (e) => {
  e.preventDefault();
  navigate(formState());
});
window.addEventListener('popstate', () => {
  // A move within the page (the skip link's #fragment) is no other window.
  if (location.search === shownSearch) return;
  const state = readState(location.search);
  showState(state);
  load(state);
});

// ---------- the map ----------

const map = L.map(mapEl, { preferCanvas: false, zoomSnap: 0.25, attributionControl: true }).setView([14.9, 120.85], 9);
map.attributionControl.setPrefix(false);
// Points above the areas, both in SVG: each keeps its own events (popups, tooltips).
map.createPane('points').style.zIndex = '450';
let pointsLayer;
map.on('moveend', () => pointsInTabOrder());
// A report's popup is a dialog (see drawPoints), closed by Escape, the focus back on its point.
map.on('popupclose', (e) => {
  // Only the popup the keyboard opened: opening another closes this one first.
  if (e.popup !== openedFrom?.popup) return;
  const back = openedFrom.el;
  openedFrom = undefined;
  if (back.isConnected) back.focus();
});
mapEl.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && e.target.closest?.('.leaflet-popup')) map.closePopup();
});
const areas = createAreas({
  map,
  api,
  mapEl,
  legendEl,
  areaTable: document.getElementById('area-table'),
  placeNote: document.getElementById('place-result'),
  adminSelect: form.elements.admin,
  placeSearch: document.getElementById('place-search'),
  placeList: document.getElementById('place-names'),
  label: document.getElementById('boundary-label'),
  onError: (message) => setStatus('error', message),
});
/**
 * The boundaries' load, shared by every window that asks for it: resolved once their first level
 * is drawn, its `rest` once every level is loaded. One that failed, or whose other levels failed
 * (a 429, an outage), is tried again by the next window.
 */
let boundariesLoading;
function loadBoundaries() {
  if (!boundariesLoading) {
    const loading = areas.load();
    const forget = () => {
      if (boundariesLoading === loading) boundariesLoading = undefined;
    };
    loading.then((b) => b.rest.catch(forget), forget);
    boundariesLoading = loading;
  }
  return boundariesLoading;
}

function popupOf(f) {
  const p = f.properties;
  const ms = Date.parse(p.created_at);
  const dl = document.createElement('dl');
  dl.className = 'popup';
  const add = (term, value) => {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    if (value instanceof Node) dd.append(value);
    else dd.textContent = value;
    dl.append(dt, dd);
  };
  add('Reported', `${formatManila(ms)} (${formatUtc(ms)})`);
  if (p.title) add('Title', p.title);
  if (p.text) add('Text', p.text);
  const id = p.tags?.local_area_id;
  const area = areas.areaName(id);
  const city = areas.cityName(p.tags?.instance_region_code);
  const inCity = city ? `, ${city}` : '';
  // Nationally a barangay's name is loaded with its city's, from close in: until then, its code.
  add('Barangay', area ? `${area.name}${inCity}` : id ? `PSGC ${id}${inCity}` : city ? `outside the barangays of ${city}` : 'outside the covered cities');
  if (typeof p.image_url === 'string' && /^https?:\/\//.test(p.image_url)) {
    const a = document.createElement('a');
    a.href = p.image_url;
    a.textContent = 'image';
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    add('Image', a);
  }
  add('Key', p.pkey);
  return dl;
}

/** The point whose popup the keyboard opened: the focus goes back to it when the popup closes. */
let openedFrom;

function drawPoints(features) {
  pointsLayer?.remove();
  // Within the map on a phone, clear of the zoom buttons: its text at most the map's width less
  // the buttons' 50 px and the popup's own 45 px of margins and border.
  const maxWidth = Math.max(150, Math.min(320, mapEl.clientWidth - 110));
  pointsLayer = L.layerGroup(
    features.map((f) => {
      const [lng, lat] = f.geometry.coordinates;
      const marker = L.circleMarker([lat, lng], { pane: 'points', className: 'point', radius: 4, color: '#922b21', weight: 1, fillColor: '#e74c3c', fillOpacity: 0.8 });
      marker.feature = f;
      marker.on('popupopen', (e) => {
        const el = e.popup.getElement();
        el?.setAttribute('role', 'dialog');
        el?.setAttribute('aria-label', `Report ${f.properties.title || f.properties.pkey}`);
      });
      // Scrolled within the map rather than taller than it (a text may be 10,000 characters).
      return marker.bindPopup(() => popupOf(f), { maxHeight: 280, maxWidth, autoPanPaddingTopLeft: L.point(50, 10) });
    }),
  ).addTo(map);
  // Each point is a button for the keyboard too: Tab reaches those in view, Enter or Space opens
  // its popup and moves the focus into it; Escape closes it, and the focus comes back.
  pointsLayer.eachLayer((marker) => {
    const el = marker.getElement();
    if (!el) return;
    const p = marker.feature.properties;
    el.setAttribute('role', 'button');
    el.setAttribute('aria-haspopup', 'dialog');
    el.setAttribute('aria-label', `Report ${p.title || p.pkey}, ${formatManila(Date.parse(p.created_at))}`);
    el.addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' && e.key !== ' ') return;
      e.preventDefault();
      openedFrom = { el, popup: marker.getPopup() };
      marker.openPopup();
      marker.getPopup()?.getElement()?.querySelector('.leaflet-popup-close-button')?.focus();
    });
  });
  pointsInTabOrder();
  mapEl.dataset.points = String(features.length);
}

/** Only the points in view are stops of the Tab key: one out of view would take the focus out of sight. */
function pointsInTabOrder() {
  const view = map.getBounds();
  pointsLayer?.eachLayer((marker) => marker.getElement()?.setAttribute('tabindex', view.contains(marker.getLatLng()) ? '0' : '-1'));
}

// ---------- the chart ----------

let chart;

function drawChart(rows, range, interval) {
  const xs = rows.map((r) => Date.parse(r.bucket) / 1000);
  const ys = rows.map((r) => r.count);
  const width = Math.max(280, chartEl.clientWidth || 400);
  const opts = {
    width,
    height: 220,
    scales: { x: { time: true, range: () => [range[0] / 1000, range[1] / 1000] }, y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.1] } },

    cursor: { drag: { x: true, y: false, setScale: false } },
    select: { show: true },
    legend: { show: false },
    series: [{}, { label: `Reports per ${interval}`, stroke: '#1f618d', fill: 'rgba(31,97,141,0.35)', paths: uPlot.paths.bars({ size: [0.9, 40], align: 1 }), points: { show: false } }],
    // Ticks and labels in Manila time, whatever the browser's zone (manilaAxis.js).
    axes: [{ splits: (_u, _i, min, max, incr) => manilaSplits(min, max, incr), values: (_u, ticks, _i, _space, incr) => manilaValues(ticks, incr) }, { label: `reports / ${interval}`, size: 50 }],
    hooks: {
      setSelect: [
        (u) => {
          if (u.select.width < 3) return;
          const from = u.posToVal(u.select.left, 'x') * 1000;
          const to = u.posToVal(u.select.left + u.select.width, 'x') * 1000;
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          const start = Math.max(range[0], Math.floor(from / 60_000) * 60_000);
          const end = Math.min(range[1], Math.ceil(to / 60_000) * 60_000 - 1000);
          if (end <= start) return;
          navigate({ ...formState(), w: 'custom', start: manilaLocal(start), end: manilaLocal(end) });
        },
      ],
    },
  };
  chart?.destroy();
  chartEl.replaceChildren();
  chart = new uPlot(opts, [xs, ys], chartEl);
  chartEl.dataset.buckets = String(rows.length);
  // A canvas says nothing to a screen reader: the chart's gist as its name.
  const total = ys.reduce((a, b) => a + b, 0);
  const peak = ys.indexOf(Math.max(0, ...ys));
  chartEl.setAttribute('role', 'img');
  chartEl.setAttribute(
    'aria-label',
    `Reports per ${interval} from ${formatManila(range[0])} to ${formatManila(range[1])}: ${total.toLocaleString('en')} in all` +
      (total > 0 ? `, the most (${ys[peak].toLocaleString('en')}) in the ${interval} from ${formatManila(xs[peak] * 1000)}.` : '.'),
  );
}

// ---------- downloads ----------

// GeoJSON and TopoJSON as plain files (no envelope): what QGIS, GDAL and geopandas open as they are.
const FORMATS = [
  ['GeoJSON', 'format=geojson'],
  ['TopoJSON', 'format=topojson'],
  ['CSV', 'format=csv'],
  ['NDJSON', 'format=ndjson'],
  ['Parquet', 'format=parquet'],
  ['Arrow', 'format=arrow'],
];
let snippetUrls = {};

function drawDownloads(params, count) {
  countEl.textContent = `${count.toLocaleString('en')} report${count === 1 ? '' : 's'} in this window.`;
  const base = `${location.origin}/reports/archive?${params}`;
  snippetUrls = {};
  linksEl.replaceChildren(
    ...FORMATS.map(([name, format]) => {
      const url = `${base}&${format}`;
      snippetUrls[name] = url;
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = url;
      a.textContent = name;
      a.dataset.format = name;
      // The exact URL, in view and selectable, for a script or another tool.
      const field = document.createElement('input');
      field.type = 'text';
      field.readOnly = true;
      field.className = 'url';
      field.value = url;
      field.setAttribute('aria-label', `${name} URL`);
      field.addEventListener('focus', () => field.select());
      li.append(a, field);
      return li;
    }),
  );
  drawSnippet();
}

function drawSnippet() {
  const csv = snippetUrls.CSV;
  const geojson = snippetUrls.GeoJSON;
  if (!csv) {
    snippetEl.textContent = '';
    return;
  }
  const snippets = {
    curl: `curl -A '${SNIPPET_UA}' -o flood-reports.csv '${csv}'`,
    // Text read as text (in R too): codes keep their leading zeros, a title "NA" or "null" stays a title.
    pandas: `from collections import defaultdict\nimport pandas as pd\n\ndf = pd.read_csv(\n    "${csv}",\n    storage_options={"User-Agent": "${SNIPPET_UA}"},\n    dtype=defaultdict(lambda: str, lng=float, lat=float),\n    keep_default_na=False,\n    na_values=[""],\n)\nprint(len(df))`,
    geopandas: `import urllib.request\nimport geopandas as gpd\n\nreq = urllib.request.Request(\n    "${geojson}",\n    headers={"User-Agent": "${SNIPPET_UA}"},\n)\nwith urllib.request.urlopen(req) as answer:\n    gdf = gpd.read_file(answer)\nprint(len(gdf), gdf.crs)`,
    r: `con <- url("${csv}",\n           headers = c("User-Agent" = "${SNIPPET_UA}"))\nreports <- read.csv(con, colClasses = "character", na.strings = "")\nreports$lng <- as.numeric(reports$lng)\nreports$lat <- as.numeric(reports$lat)\nnrow(reports)`,
  };
  snippetEl.textContent = snippets[snippetLang.value];
  snippetEl.dataset.lang = snippetLang.value;
}

snippetLang.addEventListener('change', drawSnippet);
document.getElementById('copy-snippet').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(snippetEl.textContent);
    setStatus(statusEl.dataset.state, 'Snippet copied.');
  } catch {
    // No clipboard permission: select the text so the keyboard can copy it.
    getSelection().selectAllChildren(snippetEl);
  }
});

// ---------- loading a view ----------

/** Nothing of an earlier window stays on the page when this one could not be loaded. */
function clearView() {
  areas.clear();
  drawPoints([]);
  chart?.destroy();
  chart = undefined;
  chartEl.replaceChildren();
  delete chartEl.dataset.buckets;
  chartEl.removeAttribute('role');
  chartEl.removeAttribute('aria-label');
  mapNote.textContent = '';
  countEl.textContent = '';
  linksEl.replaceChildren();
  snippetUrls = {};
  drawSnippet();
}

let generation = 0;

async function load(state) {
  const mine = ++generation;
  const range = windowOf(state);
  if (typeof range === 'string') {
    // Nothing of the window before stays on show (its count, its links), and the map still gets its places.
    clearView();
    setStatus('error', range);
    await loadBoundaries().catch(() => {});
    return;
  }
  setStatus('loading', `Loading ${formatManila(range[0])} – ${formatManila(range[1])}…`);
  // The points of the window before go at once: never drawn beside this one's counts.
  drawPoints([]);
  // Said before what the window shows: a place of the link the boundaries now lack.
  let note = '';
  const say = (kind, text) => setStatus(kind, note ? `${note} ${text}` : text);
  try {
    const boundaries = await loadBoundaries();
    // A publish since the map was drawn: its counts are of the areas it shows, which reports
    // tagged since (or re-tagged by a reprocess) do not carry, so they may fall short. Asked
    // afresh (the levels the map loaded may be in the browser's cache), beside the window's own.
    const published = api('/cities/levels', { cache: 'no-cache' }).then((a) => a.result.version !== boundaries.version, () => false);
    const told = async () => {
      if (await published) note = `The boundaries were updated since this map was drawn: reload the page to see them.${note ? ` ${note}` : ''}`;
    };
    if (state.admin) {
      // A link shared before a publish may name a place the boundaries now published lack: every
      // place is shown, and the link says so, rather than refused requests beside a list that
      // names no place.
      await boundaries.rest;
      if (mine !== generation) return;
      if (![...form.elements.admin.options].some((o) => o.value === state.admin)) {
        note = `${state.admin} is not among the places of the boundaries published now, so every place is shown.`;
        state = { ...state, admin: '' };
        history.replaceState(null, '', stateQuery(state));
        showState(state);
      }
    }
    const params = windowParams(range, state.admin);
    // What the map shows names the boundary version it is drawn with (the areas of admin= and
    // by=), across a publish; the download links do not, so they keep working after the next one.
    const shown = `${params}&version=${encodeURIComponent(boundaries.version)}`;
    const interval = intervalFor(range);
    // The series' total is the window's count (the same filters): no separate /count request.
    const seriesAnswer = api(`/reports/archive/stats?${shown}&interval=${interval}&tz=%2B0800`);
    // Awaited below; this handler only keeps a failure from being reported as unhandled meanwhile.
    seriesAnswer.catch(() => {});
    // The map first, as soon as the counts of the level in view are in; the chart and the count follow.
    await areas.setWindow(params, async (level) => {
      const answer = await api(`/reports/archive/stats?${shown}&interval=month&by=${level}&tz=%2B0800`);
      const byKey = new Map();
      for (const r of answer.result.rows) if (r.key !== null) byKey.set(r.key, (byKey.get(r.key) ?? 0) + r.count);
      return byKey;
    });
    if (mine !== generation) return;
    // Every level loaded: the window's place can be shown in the list.
    await boundaries.rest;
    if (mine !== generation) return;
    form.elements.admin.value = state.admin;
    const series = await seriesAnswer;
    await told();
    if (mine !== generation) return;
    drawChart(series.result.rows, range, interval);
    const n = series.result.total;
    drawDownloads(params, n);
    if (n === 0) {
      drawPoints([]);
      mapNote.textContent = '';
      say('empty', 'No reports in this window. Try a longer window or another place.');
      return;
    }
    if (n > MAX_POINTS) {
      drawPoints([]);
      mapNote.textContent = `${n.toLocaleString('en')} reports: too many to draw one by one, so the areas on the map show the counts. Narrow the window (drag on the chart) to see the reports as points.`;
      say('ready', `${n.toLocaleString('en')} reports between ${formatManila(range[0])} and ${formatManila(range[1])}.`);
      return;
    }
    const answer = await api(`/reports/archive?${shown}&format=json&geoformat=geojson`);
    if (mine !== generation) return;
    drawPoints(answer.result.features);
    mapNote.textContent = 'Select a point for the report (Tab reaches the points in view).';
    say('ready', `${n.toLocaleString('en')} report${n === 1 ? '' : 's'} between ${formatManila(range[0])} and ${formatManila(range[1])}, shown as points.`);
  } catch (err) {
    if (mine !== generation) return;
    clearView();
    if (err instanceof RateLimited) setStatus('limited', err.message);
    else if (err instanceof ServiceDown) setStatus('error', err.message);
    else setStatus('error', err instanceof ApiError ? err.message : 'Something went wrong while drawing this window.');
  }
}

// For the console and the page's tests: the Leaflet map.
window.floodExplorer = { map };

const initial = readState(location.search);
showState(initial);
load(initial);
