// A CAP feed of a thousand long reports takes xmlbuilder2 a good part of a second of synchronous
// work: built on the API's main thread, it stalled every other request (and keep-alive posts
// were reset behind it). It is built on a thread of its own, as a large boundary version is
// parsed (versionParse.ts); the main thread only copies the alerts across.
import { Worker } from 'node:worker_threads';
import pLimit from 'p-limit';
import { workerScript } from '../shared/workerScript.js';
import { capFeed, type AreaNames, type CapAlert, type CapCancel, type FeedInfo } from './cap.js';

/** A feed's alerts fewer than this are built on the calling thread: a thread costs more. */
const ON_THREAD_FROM_ALERTS = 50;

/** The names of the cities and barangays a feed's alerts name, as plain objects a thread receives. */
export interface NamesUsed {
  cities: Record<string, string>;
  localAreas: Record<string, string>;
}

export interface CapFeedJob {
  feed: FeedInfo;
  alerts: readonly CapAlert[];
  cancels: readonly CapCancel[];
  names: NamesUsed;
  nowMs: number;
}

export function namesOf(used: NamesUsed): AreaNames {
  return { city: (code) => used.cities[code], localArea: (psgc) => used.localAreas[psgc] };
}

/** Feeds built on threads at once: readers of many areas after a flush would each start an isolate. */
const oneAtATime = pLimit(1);

/** The feed's Atom document (capFeed), built on a thread of its own when it is large. */
export async function capFeedOffThread(feed: FeedInfo, alerts: readonly CapAlert[], names: AreaNames, nowMs: number, cancels: readonly CapCancel[] = []): Promise<string> {
  if (alerts.length + cancels.length < ON_THREAD_FROM_ALERTS) return capFeed(feed, alerts, names, nowMs, cancels);
  const used: NamesUsed = { cities: {}, localAreas: {} };
  for (const { feature } of alerts) {
    const { instance_region_code: city, local_area_id: area } = feature.properties.tags;
    const cityName = city ? names.city(city) : undefined;
    const areaName = area ? names.localArea(area) : undefined;
    if (city && cityName !== undefined) used.cities[city] = cityName;
    if (area && areaName !== undefined) used.localAreas[area] = areaName;
  }
  const job: CapFeedJob = { feed, alerts, cancels, names: used, nowMs };
  return oneAtATime(
    () =>
      new Promise<string>((resolve, reject) => {
        const thread = new Worker(workerScript('events/capThread'), { workerData: job });
        thread.once('message', resolve);
        thread.once('error', reject);
        // Ended without its document: the request fails, the process goes on.
        thread.once('exit', (code) => reject(new Error(`the CAP feed's thread ended without it (exit code ${code})`)));
      }),
  );
}
