// CAP 1.2 for alerting systems: GET /reports/cap.atom (an Atom feed of one alert per report created
// in the last 24 hours, and a Cancel of each of those retracted, optionally of one city) and
// GET /reports/{pkey}.cap (one alert). Both read the event log the worker writes (on either
// backend), so they need no archive query.
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import { HttpError } from '../shared/errors.js';
import { capDocument, type AreaNames, type CapAlert } from '../events/cap.js';
import { capFeedOffThread } from '../events/capFeedThread.js';
import type { EventFeed, StoredEvent } from '../events/events.js';
import { parsePkey } from '../store/layout.js';
import { digestOf, REVALIDATE } from './bodyTags.js';
import { applyEncoding, encodeAnswer, ifNoneMatch, negotiateEncoding, answerNotModified } from './encoding.js';
import { VERSION_TAG } from '../shared/version.js';
import { BuiltAnswers } from './builtAnswers.js';
import { readAdmin, readQuery, throwIfAny } from './query.js';
import { PKEY_MESSAGE } from './reports.js';
import { handlerSet, type Handlers } from './route.js';

const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;
/** Alerts a feed carries at most (the newest), and as many Cancels at most (the latest). */
const FEED_LIMIT = 1000;
/** Feeds kept built: the whole country's and some areas' (one of a thousand long reports is some 7 MB). */
const FEEDS_BYTES = 64 * 1024 * 1024;

export interface CapDeps {
  events: EventFeed;
  boundaries: BoundaryRepository;
  /** The base of the alerts' ids and links (config, never the request's Host: these answers are cached publicly). */
  publicBase: () => string;
}

export function capHandlers(deps: CapDeps): Handlers {
  const { handlers, serve } = handlerSet<'capFeed' | 'capAlert'>();
  const feeds = new BuiltAnswers<Buffer>(FEEDS_BYTES);

  serve('capFeed', async (req, res) => {
    const { values, details } = readQuery(req, ['admin']);
    const current = await deps.boundaries.current();
    const areas = current.adminAreas;
    const cities = values.admin === undefined ? undefined : readAdmin(values.admin, areas, details);
    throwIfAny(details);
    // The feed's instant to the minute: the same alerts within a minute are the same bytes (its
    // subtitle names it), so a reader polling more often than that is answered 304 while no
    // report is archived or retracted.
    const now = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
    const base = deps.publicBase();
    // What the feed is made of, which fixes its bytes: its ETag comes from it (a revalidation
    // builds nothing), and it is built (and encoded) once for it, until an event is logged, the
    // minute turns or the boundaries change; a large one on a thread of its own (capFeedThread.ts).
    const slot = JSON.stringify([values.admin ?? null, current.version, base]);
    const key = JSON.stringify([slot, now, await deps.events.lastSeq()]);
    const encoding = negotiateEncoding(req, true);
    const etag = `"${digestOf(key, VERSION_TAG)}${applyEncoding(res, encoding)}"`;
    res.set({ 'Cache-Control': REVALIDATE, ETag: etag }).type('application/atom+xml; charset=utf-8');
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      answerNotModified(res);
      return;
    }
    const text = await feeds.of(
      key,
      async () => {
        const alerts = (await deps.events.createdBetween(now - DAY_MS, now + 3_600_000, FEED_LIMIT, cities)).map((e) => alertOf(e, base));
        // The alerts of the same reports withdrawn since: an aggregator that took one drops it now.
        const cancels = (await deps.events.cancelledBetween(now - DAY_MS, now + 3_600_000, FEED_LIMIT, cities)).map((c) => ({ ...c, url: reportUrl(base, c.pkey) }));
        const self = `${base}/reports/cap.atom${values.admin === undefined ? '' : `?admin=${encodeURIComponent(values.admin)}`}`;
        const title = `Flood reports of the last 24 hours${values.admin === undefined ? '' : ` in ${areas.get(values.admin)?.name ?? values.admin}`}`;
        return Buffer.from(await capFeedOffThread({ self, title, sinceMs: now - DAY_MS }, alerts, areaNamesOf(current), now, cancels));
      },
      slot,
    );
    res.send(encoding === 'identity' ? text : await feeds.of(`${key} ${encoding}`, () => encodeAnswer(text, encoding), `${slot} ${encoding}`));
  });

  serve('capAlert', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const pkey = String(req.params.pkey);
    if (!parsePkey(pkey)) {
      throw new HttpError(400, 'The path does not name a report.', [{ in: 'path', field: 'pkey', message: PKEY_MESSAGE }]);
    }
    const events = deps.events;
    const event = await events.archivedReport(pkey);
    if (!event) {
      if (await events.wasRetracted(pkey)) throw new HttpError(410, `The report ${pkey} was retracted.`, [{ in: 'path', field: 'pkey', message: 'was retracted' }]);
      throw new HttpError(404, `No alert for ${pkey}: it is not archived, or older than the events kept.`, [{ in: 'path', field: 'pkey', message: 'has no alert' }]);
    }
    res.set('Cache-Control', REVALIDATE).type('application/cap+xml; charset=utf-8');
    res.send(capDocument(alertOf(event, deps.publicBase()), areaNamesOf(await deps.boundaries.current())));
  });

  return handlers;
}

function alertOf(e: StoredEvent, base: string): CapAlert {
  return { feature: e.feature, sentMs: e.at_ms, url: reportUrl(base, e.pkey) };
}

function reportUrl(base: string, pkey: string): string {
  return `${base}/reports/${encodeURIComponent(pkey)}.cap`;
}

/** The names alerts give places, made once per boundary version (41,096 barangays nationally), not per request. */
const namesByVersion = new WeakMap<LoadedBoundaries, AreaNames>();

function areaNamesOf(current: LoadedBoundaries): AreaNames {
  let names = namesByVersion.get(current);
  if (!names) {
    const cities = new Map(current.levels.cities.properties.map((p) => [p.code, p.name]));
    const areas = new Map(current.levels.localAreas.properties.map((p) => [p.psgc, p.name]));
    names = { city: (c) => cities.get(c), localArea: (a) => areas.get(a) };
    namesByVersion.set(current, names);
  }
  return names;
}
