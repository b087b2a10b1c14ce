// An accepted report as the row the archive keeps: the worker's for each queued report, a bulk
// import's for each it accepts. The tags are the tagger's at the time of writing.
import type { ArchiveRow } from '../archive/partColumns.js';
import type { Tags } from '../boundaries/tagger.js';
import type { IngestRecord } from '../ledger/ledger.js';

/** `record.report` as validated (parsePartnerReport); `version` the boundary version of `tags`. */
export function archiveRowOf(record: IngestRecord, tags: Tags, version: string): ArchiveRow {
  const { report } = record;
  return {
    pkey: record.pkey,
    created_at_ms: Date.parse(report.created_at),
    source: record.source,
    status: 'confirmed',
    url: null,
    image_url: report.image_url,
    disaster_type: report.disaster_type,
    report_data: null,
    instance_region_code: tags.instance_region_code,
    local_area_id: tags.local_area_id,
    title: report.title ?? '',
    text: report.text ?? '',
    lng: report.location.lng,
    lat: report.location.lat,
    post_id: report.post_id,
    partner_city: report.partner_city,
    received_at_ms: Date.parse(record.received_at),
    boundary_version: version,
    key_name: record.partner ?? null,
    province_code: tags.province_code,
    region_code: tags.region_code,
  };
}
