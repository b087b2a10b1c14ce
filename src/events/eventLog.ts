// The embedded backend's event log: a SQLite database beside the ledger (events.sqlite under
// DATA_DIR) shared by the worker (which records), the API processes (which stream and serve CAP
// from it) and the CLI (which manages subscriptions). Each archived report is one event with a
// monotonic sequence number (the stream's event id); recording an event also queues, in the same
// transaction, one delivery per matching webhook subscription, so no event can be recorded
// without its deliveries, nor announced twice after a crash (events are unique per report).
import path from 'node:path';
import Database from 'better-sqlite3';
import { newUlid } from '../shared/ulid.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import { ensureDataDir, privateDatabaseFile } from '../shared/files.js';
import { CONNECTION_PRAGMAS, guardSync, migrate, writeOnLoop } from '../sqlite/database.js';
import type { CancelledAlert, EventFeed, EventKind, StoredEvent } from './events.js';
import { featureOf, type ReportFeature } from './feature.js';
import type { Subscription } from './subscriptions.js';
import { UnavailableError } from '../shared/errors.js';

/** SQLite's failures as the event log's (a 503 that names it, not the ledger). */
const guard = <T>(fn: () => T): T => guardSync(fn, 'events');

const MIGRATIONS = [
  `CREATE TABLE subscriptions (
     id TEXT PRIMARY KEY,
     url TEXT NOT NULL,
     secret TEXT NOT NULL,
     -- JSON arrays; empty means "any".
     admins TEXT NOT NULL,
     local_areas TEXT NOT NULL,
     kinds TEXT NOT NULL,
     created_at_ms INTEGER NOT NULL
   );
   CREATE TABLE events (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     -- kind:pkey: a report is announced once per kind, whatever the worker repeats.
     key TEXT NOT NULL UNIQUE,
     kind TEXT NOT NULL,
     pkey TEXT NOT NULL,
     admin TEXT,
     local_area TEXT,
     created_at_ms INTEGER NOT NULL,
     lng REAL NOT NULL,
     lat REAL NOT NULL,
     at_ms INTEGER NOT NULL,
     feature TEXT NOT NULL
   );
   CREATE INDEX events_at ON events (at_ms);
   CREATE INDEX events_created ON events (created_at_ms);
   CREATE INDEX events_pkey ON events (pkey);
   CREATE TABLE deliveries (
     -- The CloudEvent id: fixed when queued, the same on every retry.
     id TEXT PRIMARY KEY,
     subscription_id TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
     kind TEXT NOT NULL,
     at_ms INTEGER NOT NULL,
     features TEXT NOT NULL,
     count INTEGER NOT NULL,
     attempts INTEGER NOT NULL DEFAULT 0,
     next_attempt_ms INTEGER NOT NULL,
     lease_until_ms INTEGER NOT NULL DEFAULT 0,
     state TEXT NOT NULL CHECK (state IN ('pending', 'set_aside')),
     last_error TEXT
   );
   CREATE INDEX deliveries_due ON deliveries (next_attempt_ms) WHERE state = 'pending';
   CREATE INDEX deliveries_subscription ON deliveries (subscription_id);`,
  // Each subscription's queue in order: its oldest pending delivery found without a scan.
  `CREATE INDEX deliveries_queue ON deliveries (subscription_id) WHERE state = 'pending';`,
  // The reports each delivery of archived reports carries: a retraction finds the deliveries
  // that would send its report by these, not by reading every waiting delivery's JSON under the
  // write lock (a dead subscriber's backlog held every retraction, and the API, for as long).
  // Kept by a trigger, so deliveries queued by any release on the file are indexed (a worker not
  // yet upgraded beside an upgraded API); the ones already there are indexed here (some 0.6 s
  // for 200,000 waiting reports).
  `CREATE TABLE delivery_reports (
     pkey TEXT NOT NULL,
     delivery_id TEXT NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
     PRIMARY KEY (pkey, delivery_id)
   ) WITHOUT ROWID;
   CREATE INDEX delivery_reports_delivery ON delivery_reports (delivery_id);
   CREATE TRIGGER deliveries_indexed AFTER INSERT ON deliveries WHEN NEW.kind = 'archived' BEGIN
     INSERT OR IGNORE INTO delivery_reports (pkey, delivery_id) SELECT json_extract(value, '$.properties.pkey'), NEW.id FROM json_each(NEW.features);
   END;
   INSERT OR IGNORE INTO delivery_reports (pkey, delivery_id)
     SELECT json_extract(f.value, '$.properties.pkey'), d.id FROM deliveries d, json_each(d.features) f WHERE d.kind = 'archived';`,
  // When a redriven delivery's retry period starts again: its at_ms is the events' time, which
  // its CloudEvent carries (a redrive made it the redrive's time before).
  `ALTER TABLE deliveries ADD COLUMN retry_from_ms INTEGER;`,
  // On a retraction's event: when the report's archived event was recorded (its CAP alert's
  // `sent`, which the retraction takes out of the log), for the CAP Cancel that names that alert.
  `ALTER TABLE events ADD COLUMN alert_sent_ms INTEGER;`,
];

/** Features a delivery carries at most: a large flush becomes several POSTs. */
const MAX_BATCH = 500;

export type { StoredEvent };

export interface Delivery {
  id: string;
  subscriptionId: string;
  kind: EventKind;
  /** When its events were recorded: its CloudEvent's time. */
  atMs: number;
  /** When its retry period began: atMs, or its last redrive. */
  retryFromMs: number;
  count: number;
  attempts: number;
  nextAttemptMs: number;
  state: 'pending' | 'set_aside';
  lastError: string | null;
}

export interface DueDelivery extends Delivery {
  url: string;
  secret: string;
  features: string;
}

export class EventLog implements EventFeed {
  private readonly db: Database.Database;
  private readonly stmts;
  /** Called after events are recorded (the dispatcher in the same process wakes at once). */
  onRecorded: (() => void) | undefined;

  constructor(dataDir: string, private readonly now: () => number = Date.now) {
    this.db = guard(() => {
      ensureDataDir(dataDir);
      const file = path.join(dataDir, 'events.sqlite');
      // It holds the webhook secrets.
      privateDatabaseFile(file);
      const db = new Database(file, { timeout: 2_000 });
      for (const pragma of CONNECTION_PRAGMAS) db.pragma(pragma);
      db.pragma('foreign_keys = ON');
      migrate(db, MIGRATIONS, 'events');
      return db;
    });
    const db = this.db;
    this.stmts = {
      insertEvent: db.prepare(
        `INSERT INTO events (key, kind, pkey, admin, local_area, created_at_ms, lng, lat, at_ms, feature)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
      ),
      subscriptions: db.prepare('SELECT * FROM subscriptions ORDER BY created_at_ms, id'),
      subscription: db.prepare('SELECT * FROM subscriptions WHERE id = ?'),
      addSubscription: db.prepare('INSERT INTO subscriptions (id, url, secret, admins, local_areas, kinds, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      removeSubscription: db.prepare('DELETE FROM subscriptions WHERE id = ?'),
      setSecret: db.prepare('UPDATE subscriptions SET secret = ? WHERE id = ?'),
      addDelivery: db.prepare(
        `INSERT INTO deliveries (id, subscription_id, kind, at_ms, features, count, next_attempt_ms, state)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')`,
      ),
      since: db.prepare('SELECT seq, kind, pkey, at_ms, feature FROM events WHERE seq > ? ORDER BY seq LIMIT ?'),
      lastSeq: db.prepare("SELECT coalesce(max(seq), 0) AS seq FROM events"),
      firstSeq: db.prepare("SELECT coalesce(min(seq), 0) AS seq FROM events"),
      createdSince: db.prepare("SELECT seq, kind, pkey, at_ms, feature FROM events WHERE kind = 'archived' AND created_at_ms >= ? AND created_at_ms <= ? ORDER BY created_at_ms DESC, pkey LIMIT ?"),
      // The area's filter before the limit: a busy day elsewhere must not push its reports out.
      createdSinceIn: db.prepare(
        `SELECT seq, kind, pkey, at_ms, feature FROM events WHERE kind = 'archived' AND created_at_ms >= ? AND created_at_ms <= ?
           AND json_extract(feature, '$.properties.tags.instance_region_code') IN (SELECT value FROM json_each(?))
         ORDER BY created_at_ms DESC, pkey LIMIT ?`,
      ),
      byPkey: db.prepare("SELECT seq, kind, pkey, at_ms, feature FROM events WHERE pkey = ? AND kind = 'archived'"),
      retracted: db.prepare("SELECT 1 FROM events WHERE key = ?"),
      setAlertSent: db.prepare('UPDATE events SET alert_sent_ms = ? WHERE key = ?'),
      cancelledSince: db.prepare(
        `SELECT pkey, alert_sent_ms, at_ms FROM events WHERE kind = 'retracted' AND alert_sent_ms IS NOT NULL AND created_at_ms >= ? AND created_at_ms <= ?
         ORDER BY at_ms DESC, pkey LIMIT ?`,
      ),
      cancelledSinceIn: db.prepare(
        `SELECT pkey, alert_sent_ms, at_ms FROM events WHERE kind = 'retracted' AND alert_sent_ms IS NOT NULL AND created_at_ms >= ? AND created_at_ms <= ?
           AND admin IN (SELECT value FROM json_each(?))
         ORDER BY at_ms DESC, pkey LIMIT ?`,
      ),
      // Deliveries of archived reports that carry one.
      deliveriesNaming: db.prepare('SELECT d.id, d.features FROM delivery_reports r JOIN deliveries d ON d.id = r.delivery_id WHERE r.pkey = ?'),
      rewriteDelivery: db.prepare('UPDATE deliveries SET features = ?, count = ? WHERE id = ?'),
      dropDeliveryReport: db.prepare('DELETE FROM delivery_reports WHERE pkey = ? AND delivery_id = ?'),
      dropArchived: db.prepare('DELETE FROM events WHERE key = ?'),
      prune: db.prepare('DELETE FROM events WHERE at_ms < ?'),
      // Each subscription's oldest pending delivery (rowid: the order they were queued in), when
      // it is due: a later one waits while an earlier one waits for its retry.
      due: db.prepare(
        `SELECT d.*, s.url, s.secret FROM subscriptions s
           JOIN deliveries d ON d.rowid = (SELECT e.rowid FROM deliveries e WHERE e.subscription_id = s.id AND e.state = 'pending' ORDER BY e.rowid LIMIT 1)
         WHERE d.next_attempt_ms <= ? AND d.lease_until_ms <= ?
         ORDER BY d.next_attempt_ms, d.id LIMIT ?`,
      ),
      lease: db.prepare('UPDATE deliveries SET lease_until_ms = ? WHERE id = ? AND lease_until_ms <= ?'),
      delivered: db.prepare('DELETE FROM deliveries WHERE id = ?'),
      retry: db.prepare('UPDATE deliveries SET attempts = attempts + 1, next_attempt_ms = ?, lease_until_ms = 0, last_error = ? WHERE id = ?'),
      setAside: db.prepare("UPDATE deliveries SET attempts = attempts + 1, state = 'set_aside', lease_until_ms = 0, last_error = ? WHERE id = ?"),
      listDeliveries: db.prepare('SELECT * FROM deliveries WHERE state = ? ORDER BY at_ms, id'),
      redrive: db.prepare(
        "UPDATE deliveries SET state = 'pending', attempts = 0, retry_from_ms = ?, next_attempt_ms = ?, last_error = NULL WHERE state = 'set_aside' AND (? IS NULL OR subscription_id = ?)",
      ),
      counts: db.prepare('SELECT subscription_id, state, count(*) AS n FROM deliveries GROUP BY subscription_id, state'),
    };
  }

  /** The worker's hook: one event per report, and the deliveries of every matching subscription. */
  async archived(rows: readonly ArchiveRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.record('archived', rows.map(featureOf));
  }

  /**
   * A retraction: the archived event goes (stream and CAP stop showing it), and the report with it
   * from the deliveries still waiting or set aside (they would send its personal fields); a
   * `retracted` event is recorded once.
   */
  async retracted(feature: ReportFeature): Promise<void> {
    const pkey = feature.properties.pkey;
    // An API request's: another process's write lock (a worker recording a flush) is waited out off the event loop.
    await writeOnLoop(this.db, () =>
      this.db
        .transaction(() => {
          // The alert that went out, before the retraction takes its event away: CAP cancels it.
          const alert = this.stmts.byPkey.get(pkey) as EventRow | undefined;
          this.hideNow(pkey);
          this.record('retracted', [feature]);
          if (alert) this.stmts.setAlertSent.run(alert.at_ms, `retracted:${pkey}`);
        })
        .immediate(),
      'events',
    );
  }

  /** The earlier event goes as a retraction's does (the stream and CAP, the deliveries waiting), in the transaction recording the new one. */
  async superseded(rows: readonly ArchiveRow[]): Promise<void> {
    if (rows.length === 0) return;
    const features = rows.map(featureOf);
    guard(() =>
      this.db
        .transaction(() => {
          for (const f of features) if (this.stmts.retracted.get(`retracted:${f.properties.pkey}`) === undefined) this.hideNow(f.properties.pkey);
          this.record('archived', features);
        })
        .immediate(),
    );
  }

  async hide(pkey: string): Promise<void> {
    await writeOnLoop(this.db, () => this.db.transaction(() => this.hideNow(pkey)).immediate(), 'events');
  }

  /** The report's archived event goes, and the report from the deliveries waiting or set aside. */
  private hideNow(pkey: string): void {
    this.stmts.dropArchived.run(`archived:${pkey}`);
    for (const row of this.stmts.deliveriesNaming.all(pkey) as { id: string; features: string }[]) {
      const kept = (JSON.parse(row.features) as ReportFeature[]).filter((f) => f.properties.pkey !== pkey);
      if (kept.length === 0) this.stmts.delivered.run(row.id);
      else {
        this.stmts.rewriteDelivery.run(JSON.stringify(kept), kept.length, row.id);
        this.stmts.dropDeliveryReport.run(pkey, row.id);
      }
    }
  }

  record(kind: EventKind, features: readonly ReportFeature[]): number {
    const now = this.now();
    const added = guard(() =>
      this.db
        .transaction(() => {
          // Each feature is serialised once, whatever number of subscriptions carry it.
          const fresh: { f: ReportFeature; json: string }[] = [];
          for (const f of features) {
            const p = f.properties;
            // Retracted while its flush ran (it read the retractions before): never announced.
            if (kind === 'archived' && this.stmts.retracted.get(`retracted:${p.pkey}`) !== undefined) continue;
            const [lng, lat] = f.geometry.coordinates as [number, number];
            const json = JSON.stringify(f);
            const inserted = this.stmts.insertEvent.run(
              `${kind}:${p.pkey}`, kind, p.pkey, p.tags.instance_region_code, p.tags.local_area_id,
              Date.parse(p.created_at), lng, lat, now, json,
            ).changes;
            if (inserted === 1) fresh.push({ f, json });
          }
          if (fresh.length === 0) return 0;
          for (const s of this.subscriptionsNow()) {
            if (!s.events.includes(kind)) continue;
            const matching = fresh.filter(({ f }) => matches(s, f));
            for (let i = 0; i < matching.length; i += MAX_BATCH) {
              const batch = matching.slice(i, i + MAX_BATCH);
              // (Indexed by its reports by the table's trigger: see MIGRATIONS.)
              this.stmts.addDelivery.run(newUlid(now), s.id, kind, now, `[${batch.map((b) => b.json).join(',')}]`, batch.length, now);
            }
          }
          return fresh.length;
        })
        .immediate(),
    );
    if (added > 0) this.onRecorded?.();
    return added;
  }

  // --- subscriptions

  private subscriptionsNow(): Subscription[] {
    return (this.stmts.subscriptions.all() as SubscriptionRow[]).map(toSubscription);
  }

  subscriptions(): Subscription[] {
    return guard(() => this.subscriptionsNow());
  }

  subscription(id: string): Subscription | undefined {
    const row = guard(() => this.stmts.subscription.get(id)) as SubscriptionRow | undefined;
    return row ? toSubscription(row) : undefined;
  }

  addSubscription(s: Subscription): void {
    guard(() =>
      this.stmts.addSubscription.run(s.id, s.url, s.secret, JSON.stringify(s.admins), JSON.stringify(s.localAreas), JSON.stringify(s.events), Date.parse(s.createdAt)),
    );
  }

  /** Replaces a subscription's signing secret; deliveries not yet made are signed with it (claims read it). False when there is none. */
  setSecret(id: string, secret: string): boolean {
    return guard(() => this.stmts.setSecret.run(secret, id).changes === 1);
  }

  /** Removes a subscription and what was waiting to be sent to it; false when there was none. */
  removeSubscription(id: string): boolean {
    return guard(() => this.stmts.removeSubscription.run(id).changes === 1);
  }

  // --- the stream and the feeds

  since(seq: number, limit = 500): StoredEvent[] {
    return (guard(() => this.stmts.since.all(seq, limit)) as EventRow[]).map(toEvent);
  }

  lastSeq(): number {
    return (guard(() => this.stmts.lastSeq.get()) as { seq: number }).seq;
  }

  firstSeq(): number {
    return (guard(() => this.stmts.firstSeq.get()) as { seq: number }).seq;
  }

  /** Archived reports created in [fromMs, toMs], newest first. */
  createdBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): StoredEvent[] {
    const rows = guard(() => (cities === undefined ? this.stmts.createdSince.all(fromMs, toMs, limit) : this.stmts.createdSinceIn.all(fromMs, toMs, JSON.stringify(cities), limit)));
    return (rows as EventRow[]).map(toEvent);
  }

  cancelledBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): CancelledAlert[] {
    const rows = guard(() => (cities === undefined ? this.stmts.cancelledSince.all(fromMs, toMs, limit) : this.stmts.cancelledSinceIn.all(fromMs, toMs, JSON.stringify(cities), limit)));
    return (rows as { pkey: string; alert_sent_ms: number; at_ms: number }[]).map((r) => ({ pkey: r.pkey, alertSentMs: r.alert_sent_ms, retractedMs: r.at_ms }));
  }

  archivedReport(pkey: string): StoredEvent | undefined {
    const row = guard(() => this.stmts.byPkey.get(pkey)) as EventRow | undefined;
    return row ? toEvent(row) : undefined;
  }

  wasRetracted(pkey: string): boolean {
    return guard(() => this.stmts.retracted.get(`retracted:${pkey}`)) !== undefined;
  }

  /** Drops events older than the retention; returns how many. */
  prune(retentionMs: number): number {
    return guard(() => this.stmts.prune.run(this.now() - retentionMs).changes);
  }

  // --- deliveries

  /** Due deliveries, each leased to the caller for `leaseMs` (another process skips them meanwhile). */
  claimDue(limit: number, leaseMs: number, skip: ReadonlySet<string>): DueDelivery[] {
    return guard(() =>
      this.db
        .transaction(() => {
          const now = this.now();
          const out: DueDelivery[] = [];
          const seen = new Set(skip);
          for (const row of this.stmts.due.all(now, now, limit * 4) as (DeliveryRow & { url: string; secret: string })[]) {
            // One at a time per subscription, in order (the query gives each one's oldest): a slow
            // or failing one holds back only its own subscription.
            if (seen.has(row.subscription_id) || out.length >= limit) continue;
            if (this.stmts.lease.run(now + leaseMs, row.id, now).changes !== 1) continue;
            seen.add(row.subscription_id);
            out.push({ ...toDelivery(row), url: row.url, secret: row.secret, features: row.features });
          }
          return out;
        })
        .immediate(),
    );
  }

  delivered(id: string): void {
    guard(() => this.stmts.delivered.run(id));
  }

  retryAt(id: string, atMs: number, error: string): void {
    guard(() => this.stmts.retry.run(atMs, error.slice(0, 500), id));
  }

  setAside(id: string, error: string): void {
    guard(() => this.stmts.setAside.run(error.slice(0, 500), id));
  }

  deliveries(state: 'pending' | 'set_aside'): Delivery[] {
    return (guard(() => this.stmts.listDeliveries.all(state)) as DeliveryRow[]).map(toDelivery);
  }

  /** Sends set-aside deliveries again from a fresh start (of one subscription, or all); returns how many. */
  redrive(subscriptionId?: string): number {
    const now = this.now();
    const id = subscriptionId ?? null;
    const n = guard(() => this.stmts.redrive.run(now, now, id, id).changes);
    if (n > 0) this.onRecorded?.();
    return n;
  }

  /** Deliveries waiting and set aside, per subscription. */
  backlog(): Map<string, { pending: number; setAside: number }> {
    const out = new Map<string, { pending: number; setAside: number }>();
    for (const r of guard(() => this.stmts.counts.all()) as { subscription_id: string; state: string; n: number }[]) {
      const entry = out.get(r.subscription_id) ?? { pending: 0, setAside: 0 };
      if (r.state === 'pending') entry.pending = r.n;
      else entry.setAside = r.n;
      out.set(r.subscription_id, entry);
    }
    return out;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

export function matches(s: Pick<Subscription, 'admins' | 'localAreas'>, f: ReportFeature): boolean {
  const tags = f.properties.tags;
  if (s.admins.length > 0 && !s.admins.some((a) => a === tags.instance_region_code || a === tags.province_code || a === tags.region_code)) return false;
  if (s.localAreas.length > 0 && !s.localAreas.includes(tags.local_area_id ?? '')) return false;
  return true;
}

interface SubscriptionRow {
  id: string;
  url: string;
  secret: string;
  admins: string;
  local_areas: string;
  kinds: string;
  created_at_ms: number;
}

interface EventRow {
  seq: number;
  kind: EventKind;
  pkey: string;
  at_ms: number;
  feature: string;
}

interface DeliveryRow {
  id: string;
  subscription_id: string;
  kind: EventKind;
  at_ms: number;
  retry_from_ms: number | null;
  features: string;
  count: number;
  attempts: number;
  next_attempt_ms: number;
  state: 'pending' | 'set_aside';
  last_error: string | null;
}

function toSubscription(r: SubscriptionRow): Subscription {
  return {
    id: r.id,
    url: r.url,
    secret: r.secret,
    admins: JSON.parse(r.admins) as string[],
    localAreas: JSON.parse(r.local_areas) as string[],
    events: JSON.parse(r.kinds) as EventKind[],
    createdAt: new Date(r.created_at_ms).toISOString(),
  };
}

function toEvent(r: EventRow): StoredEvent {
  let feature: ReportFeature;
  try {
    feature = JSON.parse(r.feature) as ReportFeature;
  } catch (err) {
    // Written as JSON by this log alone: text that is not is a damaged file (events.sqlite), not a request's fault.
    throw new UnavailableError('events', `event log damaged: event ${r.seq} cannot be read (${(err as Error).message})`, { cause: err });
  }
  return { seq: r.seq, kind: r.kind, pkey: r.pkey, at_ms: r.at_ms, feature };
}

function toDelivery(r: DeliveryRow): Delivery {
  return {
    id: r.id,
    subscriptionId: r.subscription_id,
    kind: r.kind,
    atMs: r.at_ms,
    retryFromMs: r.retry_from_ms ?? r.at_ms,
    count: r.count,
    attempts: r.attempts,
    nextAttemptMs: r.next_attempt_ms,
    state: r.state,
    lastError: r.last_error,
  };
}
