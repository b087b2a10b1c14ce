// CAP 1.2 alerts (OASIS Common Alerting Protocol) for archived reports, one alert per report, and
// the Atom feed that carries them. The fixed values follow the reference deployment's CAP output
// for floods: category Met, urgency Immediate (it is happening), certainty Observed (a person on
// the ground reports it), and severity from the flood depth as that deployment graded its flood
// states: Minor up to 70 cm, Moderate from 71 to 150 cm, Severe above; Unknown when the report
// carries no depth (`report_data.flood_depth`, centimetres), as partner reports today do.
import { create } from 'xmlbuilder2';
import type { XMLBuilder } from 'xmlbuilder2/lib/interfaces.js';
import type { ReportFeature } from './feature.js';

export const CAP_NS = 'urn:oasis:names:tc:emergency:cap:1.2';
const ATOM_NS = 'http://www.w3.org/2005/Atom';
export const CAP_SENDER = 'flood-archive';
/** Manila time: CAP's date-times carry an offset and no fractions. */
const OFFSET_MS = 8 * 3_600_000;
/** How long an alert stands after the report's time. */
const EXPIRES_AFTER_MS = 24 * 3_600_000;
/** Radius of the alert's circle around the reported point, in km. */
const CIRCLE_KM = 0.1;

/** City and barangay names of the current boundaries. */
export interface AreaNames {
  city(code: string): string | undefined;
  localArea(psgc: string): string | undefined;
}

export interface CapAlert {
  feature: ReportFeature;
  /** When the report was archived (the alert's `sent`). */
  sentMs: number;
  /** Absolute URL of the report's own `.cap` document. */
  url: string;
}

/** A CAP `Cancel` of an alert whose report was retracted: it names the alert, and carries none of the report. */
export interface CapCancel {
  pkey: string;
  /** The withdrawn alert's `sent`. */
  alertSentMs: number;
  /** When the report was retracted (the Cancel's `sent`). */
  retractedMs: number;
  /** Absolute URL of the report's `.cap` (410 since): the Cancel's entry's id is built on it. */
  url: string;
}

export type CapSeverity = 'Minor' | 'Moderate' | 'Severe' | 'Unknown';

/** The reference deployment's grading of a flood depth in centimetres. */
export function capSeverity(f: ReportFeature): CapSeverity {
  const data = f.properties.report_data;
  const depth = data !== null && typeof data === 'object' ? (data as { flood_depth?: unknown }).flood_depth : undefined;
  if (typeof depth !== 'number' || !Number.isFinite(depth) || depth <= 0) return 'Unknown';
  if (depth <= 70) return 'Minor';
  if (depth <= 150) return 'Moderate';
  return 'Severe';
}

/**
 * A value as XML text or attribute data. xmlbuilder2 leaves an `&` that starts something shaped
 * like a reference (`&nbsp;`, `&#0;`, `&amp;`) as it is, taking the text for escaped already: a
 * partner's `&nbsp;` made the document ill-formed, its `&amp;` read back as `&`. Each `&` given as
 * `&amp;` first is data whatever follows it (the writer escapes `<`, `>` and quotes itself). A
 * carriage return goes as `&#13;`: written as it is, every XML reader would read a line feed
 * (XML 1.0 §2.11), and the text would differ from the archive's.
 */
function data(value: string): string {
  return value.replaceAll('&', '&amp;').replaceAll('\r', '&#13;');
}

/** A coordinate in decimal degrees, as CAP asks: never in exponent notation (1e-7). */
function degrees(n: number): string {
  const fixed = n.toFixed(7).replace(/\.?0+$/, '');
  return fixed === '-0' ? '0' : fixed;
}

function capTime(ms: number): string {
  return `${new Date(Math.floor(ms / 1000) * 1000 + OFFSET_MS).toISOString().slice(0, 19)}+08:00`;
}

function areaDesc(f: ReportFeature, names: AreaNames): string {
  const { instance_region_code: city, local_area_id: area } = f.properties.tags;
  const cityName = city ? (names.city(city) ?? city) : undefined;
  const areaName = area ? (names.localArea(area) ?? area) : undefined;
  if (cityName && areaName) return `${areaName}, ${cityName}`;
  if (cityName) return cityName;
  const [lng, lat] = f.geometry.coordinates as [number, number];
  return `Outside the covered cities (${degrees(lat)}, ${degrees(lng)})`;
}

function headline(f: ReportFeature, names: AreaNames): string {
  return f.properties.title.trim() !== '' ? f.properties.title : `Flood reported: ${areaDesc(f, names)}`;
}

function appendAlert(parent: XMLBuilder, alert: CapAlert, names: AreaNames): void {
  const f = alert.feature;
  const p = f.properties;
  const [lng, lat] = f.geometry.coordinates as [number, number];
  const onset = Date.parse(p.created_at);
  const a = parent.ele(CAP_NS, 'alert');
  a.ele('identifier').txt(data(p.pkey));
  a.ele('sender').txt(CAP_SENDER);
  a.ele('sent').txt(capTime(alert.sentMs));
  a.ele('status').txt('Actual');
  a.ele('msgType').txt('Alert');
  a.ele('scope').txt('Public');
  const info = a.ele('info');
  info.ele('language').txt('en-US');
  info.ele('category').txt('Met');
  info.ele('event').txt('Flood');
  info.ele('urgency').txt('Immediate');
  info.ele('severity').txt(capSeverity(f));
  info.ele('certainty').txt('Observed');
  info.ele('onset').txt(capTime(onset));
  info.ele('expires').txt(capTime(onset + EXPIRES_AFTER_MS));
  info.ele('senderName').txt('Flood report archive');
  info.ele('headline').txt(data(headline(f, names)));
  if (p.text.trim() !== '') info.ele('description').txt(data(p.text));
  info.ele('web').txt(data(alert.url));
  if (p.image_url) {
    const r = info.ele('resource');
    r.ele('resourceDesc').txt('photo sent with the report');
    r.ele('mimeType').txt(imageTypeOf(p.image_url));
    r.ele('uri').txt(data(p.image_url));
  }
  const area = info.ele('area');
  area.ele('areaDesc').txt(data(areaDesc(f, names)));
  area.ele('circle').txt(`${degrees(lat)},${degrees(lng)} ${CIRCLE_KM}`);
  if (p.tags.local_area_id) {
    const g = area.ele('geocode');
    g.ele('valueName').txt('PSGC');
    g.ele('value').txt(data(p.tags.local_area_id));
  }
}

/**
 * A Cancel (CAP 1.2 §3.2.1 msgType, §3.2.1 references "sender,identifier,sent" of the message
 * withdrawn): an aggregator that took the alert drops it now rather than at its `expires`.
 */
function appendCancel(parent: XMLBuilder, cancel: CapCancel): void {
  const a = parent.ele(CAP_NS, 'alert');
  a.ele('identifier').txt(data(`${cancel.pkey}.cancel`));
  a.ele('sender').txt(CAP_SENDER);
  a.ele('sent').txt(capTime(cancel.retractedMs));
  a.ele('status').txt('Actual');
  a.ele('msgType').txt('Cancel');
  a.ele('scope').txt('Public');
  a.ele('note').txt('The report was retracted by the partner that sent it.');
  a.ele('references').txt(data(`${CAP_SENDER},${cancel.pkey},${capTime(cancel.alertSentMs)}`));
}

const XML_OPTIONS = { version: '1.0', encoding: 'UTF-8', invalidCharReplacement: '' } as const;

/** One report's CAP document. */
export function capDocument(alert: CapAlert, names: AreaNames): string {
  const doc = create(XML_OPTIONS);
  appendAlert(doc, alert, names);
  return doc.end({ prettyPrint: true });
}

export interface FeedInfo {
  /** Absolute URL of the feed itself. */
  self: string;
  title: string;
  /** Reports created from this instant on. */
  sinceMs: number;
}

/**
 * An Atom feed with one entry per alert, each entry's content the CAP alert itself, then one per
 * Cancel of an alert whose report was retracted (its content the Cancel; no link: the report's
 * `.cap` is gone).
 */
export function capFeed(feed: FeedInfo, alerts: readonly CapAlert[], names: AreaNames, nowMs: number, cancels: readonly CapCancel[] = []): string {
  const doc = create(XML_OPTIONS);
  const root = doc.ele(ATOM_NS, 'feed');
  root.ele('id').txt(data(feed.self));
  root.ele('title').txt(data(feed.title));
  root.ele('subtitle').txt(`CAP 1.2 alerts, one per flood report created since ${new Date(feed.sinceMs).toISOString()}, and a Cancel for each of those retracted`);
  const latest = Math.max(alerts.reduce((m, a) => Math.max(m, a.sentMs), 0), cancels.reduce((m, c) => Math.max(m, c.retractedMs), 0));
  root.ele('updated').txt(new Date(latest || nowMs).toISOString());
  root.ele('author').ele('name').txt('Flood report archive');
  root.ele('link', { rel: 'self', type: 'application/atom+xml', href: data(feed.self) });
  for (const alert of alerts) {
    const entry = root.ele('entry');
    entry.ele('id').txt(data(alert.url));
    entry.ele('title').txt(data(headline(alert.feature, names)));
    entry.ele('updated').txt(new Date(alert.sentMs).toISOString());
    entry.ele('link', { rel: 'alternate', type: 'application/cap+xml', href: data(alert.url) });
    appendAlert(entry.ele('content', { type: 'application/cap+xml' }), alert, names);
  }
  for (const cancel of cancels) {
    const entry = root.ele('entry');
    entry.ele('id').txt(data(`${cancel.url}#cancel`));
    entry.ele('title').txt(data(`Cancelled: the alert for ${cancel.pkey} (the report was retracted)`));
    entry.ele('updated').txt(new Date(cancel.retractedMs).toISOString());
    appendCancel(entry.ele('content', { type: 'application/cap+xml' }), cancel);
  }
  return doc.end({ prettyPrint: true });
}

/** Image types by a URL path's extension: CAP asks for a resource's content type, not a range such as image/*. */
const IMAGE_TYPES: Record<string, string> = { jpg: 'image/jpeg', jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp', heic: 'image/heic', avif: 'image/avif' };

/** The photo's content type, from its URL's extension; unknown (a page, a URL without one): application/octet-stream. */
export function imageTypeOf(url: string): string {
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    return 'application/octet-stream';
  }
  const ext = /\.([A-Za-z0-9]+)$/.exec(pathname)?.[1]?.toLowerCase();
  return (ext !== undefined && IMAGE_TYPES[ext]) || 'application/octet-stream';
}
