// What a release says about itself (FORMAT.md): its manifest, its STAC Item, the STAC Collection
// and Catalog that list every release, and its citation. Pure functions of the manifests.
import { answerColumns, type ColumnSpec } from '../archive/schema.js';
import { RELEASES_PREFIX } from './layout.js';

export type Bbox = [number, number, number, number];

export interface ReleaseFile {
  /** Relative to the release's folder. */
  path: string;
  format: 'GeoParquet 1.1' | 'CSV (gzip)';
  media_type: string;
  /** The UTC month it holds: `2025-06`. */
  month: string;
  reports: number;
  bytes: number;
  sha256: string;
}

export interface Change {
  revision: number;
  created: string;
  note: string;
}

export interface Manifest {
  release: string;
  period: string;
  revision: number;
  created: string;
  /** The reports' window: created_at from start to end, UTC. */
  window: { start: string; end: string };
  reports: number;
  /** Of the reports' points; null for none. */
  bbox: Bbox | null;
  /** The first and last created_at; null for none. */
  time_extent: [string, string] | null;
  boundary_version: { id: string; label: string; attribution: string | null };
  /** The boundary versions the reports carry, most reports first (absent from manifests made before it was kept). */
  tagged_with?: { id: string; reports: number }[];
  files: ReleaseFile[];
  schema: { name: string; type: string; nullable: boolean; description: string }[];
  license: string;
  publisher: string;
  made_with: { service: string; command: string; selection: string };
  /** Every revision of the period, this one last. */
  changes: Change[];
}

const TYPE: Record<ColumnSpec['kind'], string> = { text: 'string', json: 'string (JSON text)', timestamp: 'timestamp (UTC, microseconds)', double: 'double', bigint: 'int64' };

/** The release files' columns: the archive answer's, then the geometry and its covering. */
export function releaseSchema(): Manifest['schema'] {
  return [
    ...answerColumns().map((c) => ({ name: c.name, type: TYPE[c.kind], nullable: c.nullable, description: c.description })),
    { name: 'geometry', type: 'binary (WKB Point, EPSG:4326; Parquet only)', nullable: false, description: 'The point, as GeoParquet 1.1 encodes it.' },
    { name: 'bbox', type: 'struct<xmin, ymin, xmax, ymax: double> (Parquet only)', nullable: false, description: "GeoParquet 1.1's covering column: the point's extent, for row-group skipping by place." },
  ];
}

export const SELECTION =
  'Every report whose created_at falls in the window, as GET /reports/archive answers it: one copy of each (the first received), retracted reports left out. Parquet sorted by created_at then pkey; CSV as the archive answers it (newest first, cells that a spreadsheet would run as formulas prefixed with an apostrophe).';

const checksum = (sha256: string) => `1220${sha256}`; // multihash: sha2-256, 32 bytes

/** A release's footprint from its bbox: a valid geometry however few places its reports are at (one point, or on one line of longitude or latitude). */
export function footprintOf([x0, y0, x1, y1]: Bbox): { type: 'Point' | 'LineString' | 'Polygon'; coordinates: unknown } {
  if (x0 === x1 && y0 === y1) return { type: 'Point', coordinates: [x0, y0] };
  if (x0 === x1 || y0 === y1) return { type: 'LineString', coordinates: [[x0, y0], [x1, y1]] };
  return { type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] };
}

const COLLECTION_ID = 'flood-reports';
const FILE_EXTENSION = 'https://stac-extensions.github.io/file/v2.1.0/schema.json';
/** `version` and the `predecessor-version` link. */
const VERSION_EXTENSION = 'https://stac-extensions.github.io/version/v1.2.0/schema.json';

/** The release's STAC Item: its files as assets, with sizes and checksums; links relative, so the catalogue moves whole. */
export function stacItem(m: Manifest, previous: string | undefined): Record<string, unknown> {
  const assets: Record<string, unknown> = {};
  for (const f of m.files) {
    assets[f.path.replace(/\.(parquet|csv\.gz)$/, (_, ext: string) => (ext === 'parquet' ? '-parquet' : '-csv'))] = {
      href: `./${f.path}`,
      type: f.media_type,
      title: `${f.month}, ${f.format}, ${reportsOf(f.reports)}`,
      roles: ['data'],
      'file:size': f.bytes,
      'file:checksum': checksum(f.sha256),
    };
  }
  assets.manifest = { href: './manifest.json', type: 'application/json', title: 'Manifest: counts, extent, checksums, schema, licence', roles: ['metadata'] };
  assets.citation = { href: './CITATION.cff', type: 'application/x-yaml', title: 'How to cite this release (Citation File Format)', roles: ['metadata'] };
  return {
    type: 'Feature',
    stac_version: '1.0.0',
    stac_extensions: [FILE_EXTENSION, VERSION_EXTENSION],
    id: m.release,
    collection: COLLECTION_ID,
    geometry: m.bbox ? footprintOf(m.bbox) : null,
    ...(m.bbox && { bbox: m.bbox }),
    properties: {
      title: `Flood reports of ${m.period}, revision ${m.revision}`,
      datetime: null,
      start_datetime: m.window.start,
      end_datetime: m.window.end,
      created: m.created,
      version: String(m.revision),
      license: m.license,
      'flood:reports': m.reports,
      'flood:period': m.period,
      // The revision as a number: versions compare as strings ("10" before "9").
      'flood:revision': m.revision,
    },
    links: [
      { rel: 'root', href: '../catalog.json', type: 'application/json' },
      { rel: 'parent', href: '../collection.json', type: 'application/json' },
      { rel: 'collection', href: '../collection.json', type: 'application/json' },
      ...(previous ? [{ rel: 'predecessor-version', href: `../${previous}/item.json`, type: 'application/geo+json' }] : []),
      { rel: 'license', href: `https://spdx.org/licenses/${m.license}.html`, type: 'text/html' },
    ],
    assets,
  };
}

/** The STAC Collection of every release: the extent they cover, each release's Item (the latest revision of each period, and the earlier ones). */
export function stacCollection(manifests: readonly Manifest[], license: string, publisher: string): Record<string, unknown> {
  const boxes = manifests.flatMap((m) => (m.bbox ? [m.bbox] : []));
  const bbox: Bbox = boxes.length > 0 ? [Math.min(...boxes.map((b) => b[0])), Math.min(...boxes.map((b) => b[1])), Math.max(...boxes.map((b) => b[2])), Math.max(...boxes.map((b) => b[3]))] : [116.9, 4.5, 126.6, 21.2];
  const starts = manifests.map((m) => m.window.start).sort();
  const ends = manifests.map((m) => m.window.end).sort();
  return {
    type: 'Collection',
    stac_version: '1.0.0',
    stac_extensions: [],
    id: COLLECTION_ID,
    title: 'Flood reports of the Philippines',
    description:
      'Immutable releases of the flood report archive: the reports partners posted, one GeoParquet 1.1 and one gzipped CSV file per month, with a manifest (counts, extent, SHA-256 of every file, schema) and a citation. A later revision of a period never changes an earlier one.',
    license,
    providers: [{ name: publisher, roles: ['producer', 'processor', 'host'] }],
    extent: { spatial: { bbox: [bbox] }, temporal: { interval: [[starts[0] ?? null, ends[ends.length - 1] ?? null]] } },
    links: [
      { rel: 'root', href: './catalog.json', type: 'application/json' },
      { rel: 'parent', href: './catalog.json', type: 'application/json' },
      ...manifests.map((m) => ({ rel: 'item', href: `./${m.release}/item.json`, type: 'application/geo+json', title: `${m.period}, revision ${m.revision}` })),
      { rel: 'license', href: `https://spdx.org/licenses/${license}.html`, type: 'text/html' },
    ],
  };
}

/** The root STAC Catalog: where a client starts. */
export function stacCatalog(): Record<string, unknown> {
  return {
    type: 'Catalog',
    stac_version: '1.0.0',
    id: 'flood-archive-releases',
    title: 'Flood report archive releases',
    description: 'Citable, immutable snapshots of the flood report archive of the Philippines.',
    links: [
      { rel: 'root', href: './catalog.json', type: 'application/json' },
      { rel: 'child', href: './collection.json', type: 'application/json', title: 'Flood reports of the Philippines' },
    ],
  };
}

/** The release's citation (Citation File Format 1.2.0): `url` when the service knows its public address. */
export function citation(m: Manifest, manifestSha256: string, publicBaseUrl: string | undefined): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    'cff-version: 1.2.0',
    'message: "If you use these data, please cite this release as below."',
    'type: dataset',
    `title: ${q(`Flood reports of the Philippines, ${m.period} (release ${m.release})`)}`,
    `version: ${q(m.release)}`,
    `date-released: ${q(m.created.slice(0, 10))}`,
    `license: ${q(m.license)}`,
    'authors:',
    `  - name: ${q(m.publisher)}`,
    ...(publicBaseUrl ? [`url: ${q(`${publicBaseUrl}/${RELEASES_PREFIX}${m.release}/`)}`] : []),
    'identifiers:',
    '  - type: other',
    `    value: ${q(`sha256:${manifestSha256}`)}`,
    '    description: "SHA-256 of the release\'s manifest.json, which holds the SHA-256 of every file"',
    `abstract: ${q(`${reportsOf(m.reports, 'flood report')} posted by partner apps, created from ${m.window.start} to ${m.window.end} (UTC), as the archive answered on ${m.created}. ${m.boundary_version.attribution ? `${/^boundaries:/i.test(m.boundary_version.attribution) ? '' : 'Boundaries: '}${m.boundary_version.attribution}.` : ''}`.trim())}`,
    '',
  ].join('\n');
}

/** `1 report`, `1,234 reports`. */
function reportsOf(n: number, noun = 'report'): string {
  return `${n.toLocaleString('en')} ${noun}${n === 1 ? '' : 's'}`;
}
