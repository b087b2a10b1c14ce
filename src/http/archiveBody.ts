// The body of a text archive answer around a window's serialised reports: the
// {statusCode, result} envelope (docs/http.md), the FeatureCollection or TopoJSON Topology that frames the
// items, the CSV header, and what separates two items.
import type { Bbox } from '../archive/query.js';
import { unionBbox, type FeatureBatch, type Run } from '../archive/render.js';
import { StoredSection } from '../archive/sidecars/index.js';
import { csvHeader, type FeatureShape } from '../archive/sql.js';

/** geojson and topojson: in the {statusCode, result} envelope; featurecollection and topology: the same without it. */
export type TextFormat = 'geojson' | 'topojson' | 'ndjson' | 'csv' | 'featurecollection' | 'topology';

export const CSV_HEADER = csvHeader();

const SHAPE_OF: Record<TextFormat, FeatureShape> = {
  geojson: 'geojson',
  topojson: 'topojson',
  ndjson: 'geojson',
  csv: 'csv',
  featurecollection: 'geojson',
  topology: 'topojson',
};

/** How each report of a format is serialised. */
export function shapeOf(format: TextFormat): FeatureShape {
  return SHAPE_OF[format];
}

/** What goes between two items of a format: a FeatureCollection's Features one a line, as its ready texts hold them. */
export function separatorOf(format: TextFormat): string {
  if (format === 'ndjson' || format === 'csv') return '\n';
  return format === 'topojson' || format === 'topology' ? ',' : ',\n';
}

/** A piece of an answer: text, bytes, or an hour's section as stored (sent as it is in a gzip answer). */
export type Piece = string | Uint8Array | StoredSection;

/** The pieces with every stored section as its plain text (a file written, a body gathered). */
export async function* plainPieces(pieces: AsyncIterable<Piece>): AsyncIterable<string | Uint8Array> {
  for await (const piece of pieces) yield piece instanceof StoredSection ? piece.plain() : piece;
}

/** The archive answer as text, one piece at a time; geojson and topojson come in the {statusCode, result} envelope. */
export async function* renderArchive(batches: AsyncIterable<FeatureBatch>, format: TextFormat, watermark?: string): AsyncIterable<string | Uint8Array | StoredSection> {
  const sep = separatorOf(format);
  // A sync's envelope says up to which instant it holds every change.
  const head = watermark === undefined ? '{"statusCode":200,' : `{"statusCode":200,"watermark":${JSON.stringify(watermark)},`;
  if (format === 'geojson') yield `${head}"result":{"type":"FeatureCollection","features":[`;
  else if (format === 'featurecollection') yield '{"type":"FeatureCollection","features":[';
  else if (format === 'topojson') yield `${head}"result":{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[`;
  else if (format === 'topology') yield '{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[';
  else if (format === 'csv') yield `${CSV_HEADER}\n`;
  let first = true;
  let bbox: Bbox | undefined;
  for await (const batch of batches) {
    if (batch.items.length === 0) continue;
    if (typeof batch.items[0] === 'string') {
      const lead = first || sep === '\n' ? '' : sep;
      yield lead + (batch.items as string[]).join(sep) + (sep === '\n' ? '\n' : '');
      first = false;
    } else {
      // Runs of joined items go out as they are: no copy into a JS string. A run read empty (a
      // purge rewrote its sidecar since the window was planned, and the hour or the reports
      // read are gone) gets no separator: the answer stays well formed.
      for (const run of batch.items as Run[]) {
        let started = false;
        for await (const piece of typeof run === 'function' ? run() : [run]) {
          if (!(piece instanceof StoredSection) && piece.byteLength === 0) continue;
          if (!started) {
            if (!first && sep !== '\n') yield sep;
            started = true;
            first = false;
          }
          yield piece;
        }
        if (started && sep === '\n') yield '\n';
      }
    }
    if (batch.bbox) bbox = bbox ? unionBbox(bbox, batch.bbox) : batch.bbox;
  }
  if (format === 'geojson') yield ']}}';
  else if (format === 'featurecollection') yield ']}';
  // topojson-server puts the bbox of the points on the topology, and none when there are no points.
  else if (format === 'topojson') yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}}`;
  else if (format === 'topology') yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}`;
}
