// An archived report as the GeoJSON Feature the archive answers with (docs/http.md, "Archived
// report fields"), which is what
// webhooks, the live stream and SNS carry.
import type { Feature, Point } from 'geojson';
import type { ArchiveRow } from '../archive/row.js';

export interface ReportProperties {
  pkey: string;
  created_at: string;
  source: string;
  status: string;
  url: string | null;
  image_url: string | null;
  disaster_type: string;
  report_data: unknown;
  tags: { instance_region_code: string | null; local_area_id: string | null };
  title: string;
  text: string;
}

export type ReportFeature = Feature<Point, ReportProperties>;

export function featureOf(row: ArchiveRow): ReportFeature {
  return {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: [row.lng, row.lat] },
    properties: {
      pkey: row.pkey,
      created_at: new Date(row.created_at_ms).toISOString(),
      source: row.source,
      status: row.status,
      url: row.url,
      image_url: row.image_url,
      disaster_type: row.disaster_type,
      report_data: row.report_data === null ? null : (JSON.parse(row.report_data) as unknown),
      tags: { instance_region_code: row.instance_region_code, local_area_id: row.local_area_id },
      title: row.title,
      text: row.text,
    },
  };
}
