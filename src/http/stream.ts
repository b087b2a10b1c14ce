// GET /reports/stream: newly archived reports as Server-Sent Events, one GeoJSON Feature each.
// The API process learns of them from the event log the worker writes (DATA_DIR/events.sqlite
// on the embedded backend, events/v1/log/ in the bucket on AWS), not from the worker's memory,
// so any number of API processes serve it. Each event's id is its position in that log: a client
// reconnecting with Last-Event-ID gets exactly what came after it, across API restarts, as long
// as the log keeps it (EVENTS_RETENTION_HOURS). So a stream can be ended at any time without
// loss: each ends after STREAM_MAX_LIFETIME_SECONDS, and one client address may hold only a few,
// so no client keeps a slot for ever or takes them all.
import type { Socket } from 'node:net';
import type { AdminAreas } from '../boundaries/adminAreas.js';
import type { Request } from 'express';
import type { EventsConfig } from '../shared/config.js';
import { HttpError } from '../shared/errors.js';
import type { EventFeed, StoredEvent } from '../events/events.js';
import { readAdmin, readBbox, readQuery, throwIfAny } from './query.js';
import { handlerSet, type Handlers } from './route.js';
import { givenTwice } from './headers.js';

const POLL_MS = 200;

export interface StreamDeps {
  events: EventFeed;
  config: Pick<EventsConfig, 'streamMaxClients' | 'streamHeartbeatMs' | 'streamMaxClientsPerAddress' | 'streamMaxLifetimeMs'>;
  /** The current boundary version's areas, which admin= names. */
  adminAreas: () => Promise<AdminAreas>;
  /** The key a request's client is counted under: its address, as the rate limits see it. */
  clientOf: (req: Request) => string;
}

interface Filter {
  /** The city codes admin= covers. */
  admin: ReadonlySet<string> | undefined;
  bbox: [number, number, number, number] | undefined;
}

const STREAM_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Accel-Buffering': 'no',
  Connection: 'keep-alive',
};

/**
 * Turns at the event log, one stream's read a turn of the event loop. The embedded log's reads
 * are synchronous, each batch parsed and sent on the main thread: streams replaying a long log
 * at once would otherwise run a batch each within one turn, and hold every other request for
 * seconds. A turn spaces the reads only; on S3, where they wait on the network, they overlap.
 */
class ReadTurns {
  private last: Promise<void> = Promise.resolve();

  /** Resolves on this caller's turn: the turn of the event loop after the previous caller's. */
  take(): Promise<void> {
    const turn = this.last.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.last = turn;
    return turn;
  }
}

export function streamHandlers(deps: StreamDeps): Handlers {
  const { handlers, serve } = handlerSet<'streamReports'>();
  const turns = new ReadTurns();
  let clients = 0;
  const byClient = new Map<string, number>();
  const release = (client: string) => {
    clients -= 1;
    const left = (byClient.get(client) ?? 1) - 1;
    if (left > 0) byClient.set(client, left);
    else byClient.delete(client);
  };

  serve('streamReports', async (req, res) => {
    const filter = await readFilter(req, deps);
    const events = deps.events;
    const lastId = readLastEventId(req);
    if (clients >= deps.config.streamMaxClients) {
      throw new HttpError(429, `This server already streams to ${deps.config.streamMaxClients} clients; retry later.`, [], { 'Retry-After': '30' });
    }
    const client = deps.clientOf(req);
    const perClient = deps.config.streamMaxClientsPerAddress;
    if ((byClient.get(client) ?? 0) >= perClient) {
      throw new HttpError(429, `This address already has ${perClient} open streams on this server; close one, or retry later.`, [], { 'Retry-After': '30' });
    }
    // A HEAD: what a GET would be answered, the stream's headers, and nothing opened.
    if (req.method === 'HEAD') {
      res.writeHead(200, STREAM_HEADERS).end();
      return;
    }
    clients += 1;
    byClient.set(client, (byClient.get(client) ?? 0) + 1);
    let cursor: number;
    try {
      let newest = await events.lastSeq();
      // An id past the newest this process has seen may come from another API process, which
      // saw a batch this one has not listed yet: asked again, not pulled back (it would repeat them).
      if (lastId !== undefined && lastId > newest) newest = await events.lastSeq(true);
      cursor = lastId ?? newest;
      // Before the oldest event kept, resume from the oldest: what was pruned cannot be sent.
      // Past the newest (an id from before the log was reset), from the newest: the stream
      // would otherwise wait for ids that are not coming.
      if (lastId !== undefined) cursor = Math.min(Math.max(cursor, (await events.firstSeq()) - 1), newest);
    } catch (err) {
      release(client);
      throw err;
    }
    res.writeHead(200, STREAM_HEADERS);
    // The id (with no data) is where a reconnect resumes, even for a client sent no event yet.
    res.write(`retry: 2000\nid: ${cursor}\n: stream of archived reports after event ${cursor}\n\n`);

    let closed = false;
    let lastWrite = Date.now();
    // Past its lifetime the stream ends between two writes: what it sent is whole, and the
    // client's Last-Event-ID resumes after it. `wake` cuts short a wait for a slow reader.
    let expired = false;
    let wake: (() => void) | undefined;
    const lifetime = setTimeout(() => {
      expired = true;
      wake?.();
    }, deps.config.streamMaxLifetimeMs);
    const finish = () => {
      clearTimeout(lifetime);
      if (closed) return;
      closed = true;
      release(client);
    };
    res.on('close', finish);
    // Gone while where the stream starts was read: its 'close' came before the listener.
    if (res.closed) finish();
    const socket = req.socket as Socket & { server?: { listening: boolean } };
    /** Resolves once the reader has taken what was written, or is gone, or the stream expires. */
    const drained = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done).off('close', done);
          wake = undefined;
          resolve();
        };
        res.on('drain', done).on('close', done);
        wake = done;
      });

    while (!closed && !expired) {
      // The server is shutting down: end the stream so the process can stop (clients reconnect).
      if (socket.server && !socket.server.listening) break;
      let batch: StoredEvent[] = [];
      await turns.take();
      if (closed) break;
      try {
        batch = await events.since(cursor, 500);
      } catch {
        // The log is busy or unreadable for a moment: the next turn tries again.
      }
      // Gone while the log was read: a write now would wait for a 'close' that has come.
      if (closed) break;
      let sent = false;
      for (const e of batch) {
        if (closed || expired) break;
        cursor = e.seq;
        if (!matches(filter, e)) continue;
        sent = true;
        // Event by event, each waiting for a slow reader to take the ones before: a stream holds
        // about one event's bytes (tens of KB at most) beyond the socket's buffer, not a batch's.
        if (!res.write(`id: ${e.seq}\nevent: ${e.kind}\ndata: ${JSON.stringify(e.feature)}\n\n`)) await drained();
      }
      if (sent) lastWrite = Date.now();
      else if (!closed && !expired && Date.now() - lastWrite >= deps.config.streamHeartbeatMs) {
        lastWrite = Date.now();
        if (!res.write(': heartbeat\n\n')) await drained();
      }
      // Caught up: wait for new events. Else the next batch, on this stream's next turn.
      if (batch.length < 500) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    // The position read up to, past events the filter left out: the reconnect resumes there.
    if (expired && !closed) res.write(`id: ${cursor}\n: this stream ends after ${deps.config.streamMaxLifetimeMs / 1000} s; reconnect with Last-Event-ID\n\n`);
    finish();
    res.end();
  });
  return handlers;
}

function matches(filter: Filter, e: StoredEvent): boolean {
  const p = e.feature.properties;
  if (filter.admin !== undefined && !filter.admin.has(p.tags.instance_region_code ?? '')) return false;
  if (filter.bbox) {
    const [lng, lat] = e.feature.geometry.coordinates as [number, number];
    const [minLng, minLat, maxLng, maxLat] = filter.bbox;
    if (lng < minLng || lng > maxLng || lat < minLat || lat > maxLat) return false;
  }
  return true;
}

async function readFilter(req: Request, deps: StreamDeps): Promise<Filter> {
  const { values, details } = readQuery(req, ['admin', 'bbox', 'lastEventId']);
  const cities = values.admin === undefined ? undefined : readAdmin(values.admin, await deps.adminAreas(), details);
  const bbox = readBbox(values.bbox, details);
  // Node joins a repeated header's values with ", ": said as repeated, not as a bad number.
  if (givenTwice(req, 'last-event-id')) details.push({ in: 'header', field: 'Last-Event-ID', message: 'must be given once' });
  // Both checked when both are given (the header wins): a bad one is a mistake either way.
  const given = [
    { in: 'header', field: 'Last-Event-ID', value: givenTwice(req, 'last-event-id') ? undefined : req.get('last-event-id') },
    { in: 'query', field: 'lastEventId', value: values.lastEventId },
  ] as const;
  for (const { value, ...where } of given) {
    if (value !== undefined && !/^\d{1,15}$/.test(value)) details.push({ ...where, message: 'must be the id of an event this stream sent (a whole number)' });
  }
  throwIfAny(details);
  return { admin: cities && new Set(cities), bbox };
}

/** Last-Event-ID (what EventSource sends on reconnecting), or ?lastEventId= for clients that cannot set headers. */
function readLastEventId(req: Request): number | undefined {
  const given = req.get('last-event-id') ?? (req.query.lastEventId as string | undefined);
  return given === undefined ? undefined : Number(given);
}

