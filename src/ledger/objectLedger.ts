// The ledger on an object store (S3): a pending marker per accepted, not yet archived report,
// and an idempotency key per pkey holding its first version, both created with a conditional PUT
// (If-None-Match: *, which S3, LocalStack, MinIO and moto enforce). A partner's reports are under
// a folder of its own (ingest/keys/partner/<name>/<post_id>.json); ingest/keys/partner/<post_id>.json
// holds reports of no partner and those accepted before post_ids were per partner, whose record
// names the partner that owns them.
//
// Order of writes on acceptance:
//   1. the marker (holds the record): once it exists the report is accepted;
//   2. the key, from the same bytes: it alone says "already exists" ever after;
//   3. the queue message.
// A crash between 1 and 2 is rolled forward by reconciliation (the key from the marker);
// a failed 3 too (the marker outlives its message).
import {
  API_KEY_NAMES_PREFIX,
  API_KEYS_PREFIX,
  IDEMPOTENCY_PREFIX,
  idempotencyKey,
  keyOfMarker,
  parsePkey,
  parseRetractionName,
  partnerFolders,
  pendingKey,
  type PkeyParts,
  PENDING_PREFIX,
  retractionName,
  RETRACTIONS_PREFIX,
  UNPURGED_PREFIX,
} from '../store/layout.js';
import type { Queue } from '../queue/queue.js';
import { listedKeys, type ListedKeys } from './listedKeys.js';
import { UnavailableError } from '../shared/errors.js';
import type { ObjectStore } from '../store/objectStore.js';
import { mapLimit } from '../ops/concurrency.js';
import { MAX_FUTURE_MS, withoutPersonalFields } from '../partners/partnerReport.js';
import {
  ADOPTED_RETRACTION_REASON,
  KeyNameInUseError,
  KeyRotationConflictError,
  parseRecord,
  PkeyTakenError,
  receivedRecordJson,
  type AcceptedReport,
  type AcceptResult,
  type ArchivedRecord,
  type HeldAcceptResult,
  type HeldRecord,
  type IngestLedger,
  type IngestRecord,
  type LedgerEntry,
  type QueueEnvelope,
  type ReportId,
  type RetractResult,
  type Retraction,
  type RetractionFilter,
  type RetractionRef,
  type StoredKey,
} from './ledger.js';
import { byCodeUnits } from '../shared/byCodeUnits.js';

/** How far a host's clock and the store's may differ, for the store's times read as ours. */
const CLOCK_MARGIN_MS = 15 * 60_000;

/**
 * A name's claim with no key, this old by our clock against the store's, is an add's that
 * stopped before writing its key: the clocks' margin, then far longer than an add takes.
 */
const STOPPED_CLAIM_MS = CLOCK_MARGIN_MS + 15 * 60_000;

/**
 * Stale markers whose records reconciliation reads at once, of up to LISTED_AT_ONCE listed: one
 * at a time, the held markers of an import of a million reports took a pass hours to read once.
 */
const READ_AT_ONCE = 16;
const LISTED_AT_ONCE = 1_000;

/** Keys `accepted` reads (16 at a time) before it yields what they hold: a year's are never held at once. */
const KEYS_AT_ONCE = 2_000;

/** A hold closer than this to its end is not renewed: reconciliation may be sending its report (clocks differ a little). */
const RENEW_MARGIN_MS = 5 * 60_000;

export class ObjectLedger implements IngestLedger {
  readonly description: string;
  /**
   * Of each pending report that requeueStale left waiting, by marker: when it was accepted (its
   * back-off), and until when a bulk import holds it. A report still waiting costs no request.
   */
  private readonly waiting = new Map<string, { acceptedMs: number; heldUntilMs: number }>();

  constructor(
    private readonly store: ObjectStore,
    private readonly queue: Queue,
    /** A hold closer than this to its end is not renewed (RENEW_MARGIN_MS). */
    private readonly renewMarginMs = RENEW_MARGIN_MS,
  ) {
    this.description = `${store.description} (ingest/)`;
  }

  accept(record: IngestRecord): Promise<AcceptResult> {
    return this.acceptOne(record, true);
  }

  /** `listed`: what a listing found of this report's objects (an import's batch); the rest are read. */
  private async acceptOne(record: IngestRecord, send: boolean, listed?: ListedKeys): Promise<AcceptResult> {
    const id: ReportId = { source: record.source, post_id: record.post_id, ...(record.partner !== undefined && { partner: record.partner }) };
    const slot = parsePkey(record.pkey)!;
    const key = idempotencyKey(slot);
    const exists = (k: string) => listed?.(k) ?? this.store.head(k).then((info) => info !== undefined);
    // A partner's repeat is found in its folder, or (reports it posted before post_ids were per
    // partner) at the shared key; a marker without its key is an acceptance cut short, whose
    // reconciliation is under way. All read at once: the acceptance waits for one round trip
    // before it writes, and its writes need no look of their own.
    const [own, marker, shared] = await Promise.all([exists(key), exists(pendingKey(slot)), slot.partner !== undefined ? this.recordAt(sharedSlot(id), listed) : undefined]);
    if (own || marker) return this.repeatOf(id, slot, record.pkey);
    if (shared && shared.partner === record.partner) return { created: false, pkey: shared.pkey };
    const body = JSON.stringify(record);
    // Lost only to an acceptance of the same report since the reads above (or, for a report of
    // no partner, to the older report that holds its key): ours is then a repeat.
    // The marker is ours only if created now (the store's adapter knows its own retried PUT):
    // two posts of one report in the same millisecond make the same bytes, and only one is new.
    if (!(await this.store.putIfAbsent(pendingKey(slot), body, { seenAbsent: true }))) return this.repeatOf(id, slot, record.pkey);
    if (!(await this.createdOrOurs(key, body))) {
      // Another report's key: it wrote its marker before its key, and no marker stood when ours
      // was written, so it was archived between our reads and our writes. Ours would have it
      // sent and stored again; no one else reads it (their markers lose to it, their reads
      // find the key), so it goes.
      await this.store.delete([pendingKey(slot)]);
      return this.repeatOf(id, slot, record.pkey);
    }
    if (send) await this.queue.send([body]);
    return { created: true, pkey: record.pkey };
  }

  /**
   * Creates the key, or finds it holding these very bytes: reconciliation rolled our marker
   * forward between our two writes (another acceptance lost at its marker). A key that stands
   * but cannot be read is not taken for another's: that would drop a report (UnavailableError:
   * the post is refused and its marker rolled forward).
   */
  private async createdOrOurs(key: string, body: string): Promise<boolean> {
    if (await this.store.putIfAbsent(key, body, { seenAbsent: true })) return true;
    const there = await this.store.get(key);
    if (!there) throw new UnavailableError('storage', `object store: ${key} was taken but cannot be read yet`);
    return there.body.equals(Buffer.from(body));
  }

  /**
   * As accept, a few dozen at once and without their messages; each marker names its hold, so
   * reconciliation leaves it to the import until then.
   */
  async acceptHeld(held: readonly HeldRecord[], receivedAt: string, holdUntilMs: number): Promise<HeldAcceptResult[]> {
    const held_until = new Date(holdUntilMs).toISOString();
    const records = held.map((r) => JSON.parse(receivedRecordJson(r.json, receivedAt)) as IngestRecord);
    // A report twice in one call: its later copies are repeats of the first, not a race for its key.
    const first = new Map<string, number>();
    records.forEach((r, i) => first.has(r.pkey) || first.set(r.pkey, i));
    // Which of their objects exist, from listings of their folders: read one by one, they were
    // two to four requests a report before its two writes.
    const listed = await listedKeys(this.store, records.flatMap((r) => objectsOf(parsePkey(r.pkey)!)));
    const results = await mapLimit(records, 32, async (record, i): Promise<HeldAcceptResult | undefined> => {
      if (first.get(record.pkey) !== i) return undefined;
      try {
        const result = await this.acceptOne({ ...record, held_until }, false, listed);
        if (result.created) return result;
        // Still held by an import (this one, before a crash): its first version, to archive.
        const slot = parsePkey(result.pkey);
        // (None when the listing found no marker: one made since is a live post's, never held.)
        const marker = slot && listed(pendingKey(slot)) !== false ? await this.store.get(pendingKey(slot)) : undefined;
        const held = marker && parseRecord(marker.body);
        if (!slot || !marker || held?.held_until === undefined || Date.parse(held.held_until) <= Date.now()) return result;
        // A run stopped between this report's marker and its key: the key from the marker (as
        // reconciliation rolls it forward; it leaves a held marker alone), before this import
        // archives the report and deletes the marker, which would leave it without its key.
        const key = idempotencyKey(slot);
        const keyThere = listed(key) ?? (await this.store.head(key)) !== undefined;
        if (!keyThere) await this.store.putIfAbsent(key, marker.body, { seenAbsent: true });
        return { created: false, pkey: result.pkey, held };
      } catch (err) {
        if (err instanceof PkeyTakenError) return { created: false, pkey: record.pkey, taken: true };
        throw err;
      }
    });
    return results.map((result, i) => {
      if (result) return result;
      const earlier = results[first.get(records[i]!.pkey)!]!;
      return 'taken' in earlier ? earlier : { created: false, pkey: earlier.pkey };
    });
  }

  /**
   * The marker names the hold: rewritten with the later one, only as read. Reconciliation sends a
   * report again only once it has read a marker whose hold has passed (it sends, then rewrites
   * the marker as read). A hold is renewed only with RENEW_MARGIN_MS still to run, so no sending
   * can have read it passed (clocks differ by less); one closer to its end is let go to the worker.
   */
  async renewHolds(pkeys: readonly string[], holdUntilMs: number): Promise<string[]> {
    const held_until = new Date(holdUntilMs).toISOString();
    const released: string[] = [];
    await mapLimit(pkeys, 32, async (pkey) => {
      const slot = parsePkey(pkey);
      const marker = slot ? pendingKey(slot) : undefined;
      const found = marker === undefined ? undefined : await this.store.get(marker);
      const record = found ? parseRecord(found.body) : undefined;
      const until = record?.held_until === undefined ? 0 : Date.parse(record.held_until);
      if (marker === undefined || !found || !record || until <= Date.now() + this.renewMarginMs) {
        released.push(pkey);
        return;
      }
      if (until >= holdUntilMs) return;
      if (!(await this.store.putIfMatch(marker, JSON.stringify({ ...record, held_until }), found.etag))) released.push(pkey);
    });
    return released;
  }

  /** Nothing to give back: each held report is an object of its own, deleted once archived. */
  async reclaimHeldSpace(): Promise<void> {}

  /**
   * The answer to an acceptance whose key `slot` is held: a repeat, or another report in the
   * way. A partner's own folder holds only its reports; the shared key holds a report of no
   * partner or a partner's older one, and is this report's only if it names the same partner
   * (or none for none).
   */
  private async repeatOf(id: ReportId, slot: PkeyParts, pkey: string): Promise<AcceptResult> {
    if (slot.partner !== undefined) return { created: false, pkey };
    const held = await this.recordAt(slot);
    if (held && held.partner !== id.partner) throw new PkeyTakenError(pkey);
    return { created: false, pkey: held?.pkey ?? pkey };
  }

  /**
   * The first version under a pkey's objects: its key, or its marker when a crash lost the key
   * before reconciliation rebuilt it. Both read at once: where neither exists (every new
   * report's look at the shared key) that is one round trip, not two.
   */
  private async recordAt(slot: PkeyParts, listed?: ListedKeys): Promise<IngestRecord | undefined> {
    const read = (key: string) => (listed?.(key) === false ? undefined : this.store.get(key));
    const [key, marker] = await Promise.all([read(idempotencyKey(slot)), read(pendingKey(slot))]);
    if (key) return parseRecord(key.body);
    return marker && parseRecord(marker.body);
  }

  async get(id: ReportId): Promise<LedgerEntry | undefined> {
    const [own, shared] = await Promise.all([
      id.partner !== undefined ? this.recordAt({ ...id, partner: id.partner }) : undefined,
      this.recordAt(sharedSlot(id)),
    ]);
    const record = own ?? (shared?.partner === id.partner ? shared : undefined);
    return record && this.entryOf(record);
  }

  async isPending(pkey: string): Promise<boolean> {
    const slot = parsePkey(pkey);
    return slot !== undefined && (await this.store.head(pendingKey(slot))) !== undefined;
  }

  async markArchived(pkeys: readonly string[]): Promise<void> {
    await this.store.delete(pkeys.flatMap((pkey) => {
      const slot = parsePkey(pkey);
      return slot ? [pendingKey(slot)] : [];
    }));
  }

  async requeueStale(beforeMs: number, options: { backOff?: boolean } = {}): Promise<number> {
    const now = Date.now();
    // With the queue empty no message is late: a report still pending lost its message.
    const backOff = (options.backOff ?? true) && !(await this.queueIsEmpty());
    const due = (sentMs: number, acceptedMs: number) => !backOff || sendsAgain({ nowMs: now, sentMs, acceptedMs, periodMs: now - beforeMs });
    let requeued = 0;
    let batch: { marker: string; etag: string; record: IngestRecord }[] = [];
    const send = async () => {
      if (batch.length === 0) return;
      await this.queue.send(batch.map((b) => JSON.stringify({ ...b.record, redelivery: true } satisfies QueueEnvelope)));
      // Rewriting the marker restarts its age: one outage yields one re-enqueue, not one per run.
      // Only the version read: a worker that archived the report since has deleted the marker,
      // and a plain PUT would bring it back (the report then stored twice until compaction).
      await mapLimit(batch, 16, (b) => this.store.putIfMatch(b.marker, JSON.stringify(b.record), b.etag));
      requeued += batch.length;
      batch = [];
    };
    /** Markers listed whose records must be read (each is two GETs), read READ_AT_ONCE at a time. */
    let unread: { key: string; sentMs: number }[] = [];
    const read = async () => {
      const records = await mapLimit(unread, READ_AT_ONCE, ({ key }) => this.recordOf(key));
      for (const [i, found] of records.entries()) {
        if (!found) continue;
        const { key, sentMs } = unread[i]!;
        const { heldUntilMs } = found;
        this.waiting.set(key, { acceptedMs: found.acceptedMs, heldUntilMs });
        if (heldUntilMs > now || !due(sentMs, found.acceptedMs)) continue;
        batch.push({ marker: key, etag: found.markerEtag, record: found.record });
        if (batch.length >= 100) await send();
      }
      unread = [];
    };
    const listed = new Set<string>();
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) {
      listed.add(info.key);
      // Its acceptance, or its last sending since.
      const sentMs = info.lastModified.getTime();
      if (sentMs >= beforeMs) continue;
      // The queue may hold its message still (workers down or behind): each sending waits as
      // long as the report had waited before it, so a backlog of thousands is sent again a few
      // times an hour, not once a period. A bulk import archives its reports itself until its
      // hold ends.
      const known = this.waiting.get(info.key);
      if (known && (known.heldUntilMs > now || !due(sentMs, known.acceptedMs))) continue;
      unread.push({ key: info.key, sentMs });
      if (unread.length >= LISTED_AT_ONCE) await read();
    }
    await read();
    await send();
    for (const key of this.waiting.keys()) if (!listed.has(key)) this.waiting.delete(key);
    return requeued;
  }

  private async queueIsEmpty(): Promise<boolean> {
    const depth = await this.queue.depth();
    return depth.visible + depth.inFlight === 0;
  }

  /**
   * The record a marker stands for, its key in place (rolled forward from the marker when a
   * crash lost it), when it was accepted (its key's time), and the marker's version as read. The
   * key's version wins: it is the first one accepted. The hold is the marker's (renewHolds
   * rewrites it). Undefined when the marker was cleared since it was listed.
   */
  private async recordOf(marker: string): Promise<{ record: IngestRecord; acceptedMs: number; markerEtag: string; heldUntilMs: number } | undefined> {
    const key = keyOfMarker(marker);
    const [found, stored] = await Promise.all([this.store.get(marker), this.store.get(key)]);
    if (!found) return undefined;
    const fromMarker = parseRecord(found.body);
    const held = { markerEtag: found.etag, heldUntilMs: fromMarker?.held_until === undefined ? 0 : Date.parse(fromMarker.held_until) };
    if (stored) {
      const record = parseRecord(stored.body) ?? fromMarker;
      return record && { record, acceptedMs: stored.lastModified.getTime(), ...held };
    }
    if (!fromMarker) return undefined;
    // The crash came between the marker and its key: the key from the marker, unless another
    // acceptance wrote it meanwhile.
    if (await this.store.putIfAbsent(key, found.body, { seenAbsent: true })) return { record: fromMarker, acceptedMs: found.lastModified.getTime(), ...held };
    const winner = await this.store.get(key);
    const record = winner && parseRecord(winner.body);
    return record ? { record, acceptedMs: winner.lastModified.getTime(), ...held } : { record: fromMarker, acceptedMs: found.lastModified.getTime(), ...held };
  }

  async *accepted(fromMs: number, toMs: number): AsyncIterable<AcceptedReport[]> {
    // Keys first, then markers: acceptance writes a report's marker before its key, and the worker
    // deletes the marker once the report is archived. So a key listed here whose marker the later
    // listing misses is archived; markers first, a report accepted between the two listings
    // would have had its key listed, no marker, and counted as archived (a false loss).
    // A key is written when its report is accepted (or later, by a purge), and a report is
    // created at most MAX_FUTURE_MS after it is received: a key written well before the window
    // holds no report of it, and is not read (the scheduled verify of the last days read every
    // key in the bucket). The margin covers clocks apart.
    const keys: string[] = [];
    for await (const info of this.store.list({ prefix: IDEMPOTENCY_PREFIX })) {
      if (info.lastModified.getTime() + MAX_FUTURE_MS + CLOCK_MARGIN_MS >= fromMs) keys.push(info.key);
    }
    const pending = new Set<string>();
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) pending.add(keyOfMarker(info.key));
    for (let i = 0; i < keys.length; i += KEYS_AT_ONCE) {
      const found: AcceptedReport[] = [];
      await mapLimit(keys.slice(i, i + KEYS_AT_ONCE), 16, async (key) => {
        const obj = await this.store.get(key);
        const record = obj && parseRecord(obj.body);
        if (!record) return;
        const createdMs = Date.parse(record.report.created_at);
        if (createdMs < fromMs || createdMs > toMs) return;
        found.push({ pkey: record.pkey, createdMs, pending: pending.has(key) });
      });
      yield found;
    }
  }

  async lookup(pkey: string): Promise<LedgerEntry | undefined> {
    const slot = parsePkey(pkey);
    const record = slot && (await this.recordAt(slot));
    if (!record || record.pkey !== pkey) return undefined;
    return this.entryOf(record);
  }

  /** A kept record as the port's entry (this ledger keeps every record whole). */
  private async entryOf(record: IngestRecord): Promise<LedgerEntry> {
    const createdMs = Date.parse(record.report.created_at);
    const [pending, retraction] = await Promise.all([this.isPending(record.pkey), this.retractionOf(record.pkey, createdMs)]);
    return { source: record.source, ...(record.partner !== undefined && { partner: record.partner }), post_id: record.post_id, pkey: record.pkey, createdMs, pending, state: retraction ? 'retracted' : 'confirmed', ...(retraction && { retraction }), record };
  }

  private async retractionOf(pkey: string, createdMs: number): Promise<Retraction | undefined> {
    const held = await this.store.get(RETRACTIONS_PREFIX + retractionName(createdMs, pkey));
    return held && (JSON.parse(held.body.toString('utf8')) as Retraction);
  }

  /**
   * The unpurged marker first (readers hide the report from then on), then the retraction
   * (If-None-Match: the first one stays). A failure or crash between them leaves the report
   * hidden and the caller with a 503: a repeat, or the next purge, completes the retraction
   * as the marker holds it (who asked, and when).
   */
  async retract(pkey: string, by: string, reason: string): Promise<RetractResult> {
    const entry = await this.lookup(pkey);
    if (!entry) return { found: false };
    if (entry.retraction) return { found: true, first: false, retraction: entry.retraction };
    const { createdMs } = entry;
    const marker = UNPURGED_PREFIX + retractionName(createdMs, pkey);
    let retraction: Retraction = { pkey, created_at: new Date(createdMs).toISOString(), retracted_at: new Date().toISOString(), by, reason };
    if (!(await this.store.putIfAbsent(marker, JSON.stringify(retraction)))) retraction = retractionIn(await this.store.get(marker), pkey) ?? retraction;
    if (await this.store.putIfAbsent(RETRACTIONS_PREFIX + retractionName(createdMs, pkey), JSON.stringify(retraction))) return { found: true, first: true, retraction };
    return { found: true, first: false, retraction: (await this.retractionOf(pkey, createdMs)) ?? retraction };
  }

  /** One ranged listing (keys sort by created_at); the retraction time is the object's. */
  async *retractions(filter: RetractionFilter = {}): AsyncIterable<RetractionRef> {
    const prefix = filter.unpurgedOnly ? UNPURGED_PREFIX : RETRACTIONS_PREFIX;
    const from = filter.createdFromMs;
    const startAfter = from !== undefined && from > 0 ? prefix + String(Math.trunc(from) - 1).padStart(15, '0') + '~' : undefined;
    for await (const info of this.store.list({ prefix, ...(startAfter && { startAfter }) })) {
      const named = parseRetractionName(info.key.slice(prefix.length));
      if (!named) continue;
      if (filter.createdToMs !== undefined && named.createdMs > filter.createdToMs) break;
      if (from !== undefined && named.createdMs < from) continue;
      yield { pkey: named.pkey, created_at: new Date(named.createdMs).toISOString(), retracted_at: info.lastModified.toISOString() };
    }
  }

  /**
   * The key keeps the report's first version for idempotency: rewritten without its personal
   * fields (as its parts were), then its unpurged marker goes. A key changed meanwhile (another
   * purge) is read again.
   */
  async markPurged(pkeys: readonly string[]): Promise<void> {
    const markers: string[] = [];
    await mapLimit(pkeys, 16, async (pkey) => {
      const slot = parsePkey(pkey);
      if (!slot) return;
      const key = idempotencyKey(slot);
      for (let attempt = 1; ; attempt++) {
        const found = await this.store.get(key);
        const record = found ? parseRecord(found.body) : await this.recordAt(slot);
        if (!record) return;
        const { report } = record;
        const cleared = report.title === null && report.text === null && report.image_url === null;
        if (!found || cleared || (await this.store.putIfMatch(key, JSON.stringify({ ...record, report: withoutPersonalFields(report) }), found.etag))) {
          markers.push(UNPURGED_PREFIX + retractionName(Date.parse(report.created_at), pkey));
          return;
        }
        // Left unpurged: the next purge clears it.
        if (attempt === 3) throw new UnavailableError('storage', `object store: ${key} kept changing while its personal fields were cleared`);
      }
    });
    await this.store.delete(markers);
  }

  /**
   * The key, created only where neither it nor a marker stands (a marker is an acceptance under
   * way, its key written from it); a tombstone's key without its personal fields, and its
   * retraction beside it with no unpurged marker (the parts are purged already).
   */
  async adoptArchived(reports: readonly ArchivedRecord[], by: string): Promise<string[]> {
    const adopted = await mapLimit(reports, 16, async ({ record, retracted }) => {
      const slot = parsePkey(record.pkey);
      if (!slot || (await this.store.head(pendingKey(slot)))) return undefined;
      // The retraction first: a run stopped between the two leaves a key only with it, and the
      // next run (the report still unknown) writes the key.
      if (retracted) {
        if (await this.store.head(idempotencyKey(slot))) return undefined;
        const createdMs = Date.parse(record.report.created_at);
        const retraction: Retraction = { pkey: record.pkey, created_at: new Date(createdMs).toISOString(), retracted_at: new Date().toISOString(), by, reason: ADOPTED_RETRACTION_REASON };
        await this.store.putIfAbsent(RETRACTIONS_PREFIX + retractionName(createdMs, record.pkey), JSON.stringify(retraction));
      }
      const kept = retracted ? { ...record, report: withoutPersonalFields(record.report) } : record;
      return (await this.store.putIfAbsent(idempotencyKey(slot), JSON.stringify(kept))) ? record.pkey : undefined;
    });
    return adopted.filter((pkey): pkey is string => pkey !== undefined);
  }

  async keyByDigest(digest: string): Promise<StoredKey | undefined> {
    if (!/^[0-9a-f]{64}$/.test(digest)) return undefined;
    const held = await this.store.get(`${API_KEYS_PREFIX}${digest}.json`);
    return held && storedKeyOf(held.body);
  }

  /**
   * A name is claimed by an object created with If-None-Match (`ingest/api-key-names/<name>.json`),
   * so of two keys added under one new name at once only one is kept; names whose keys were kept
   * before the claims existed are found by listing the keys.
   */
  async addKey(name: string, digest: string): Promise<void> {
    const key: StoredKey = { name, digest, created_at: new Date().toISOString() };
    const claim = `${API_KEY_NAMES_PREFIX}${name}.json`;
    const claimBody = JSON.stringify({ name, created_at: key.created_at, digest });
    if ((await this.listKeys()).some((k) => k.name === name)) throw new KeyNameInUseError(name);
    // Before the claim: a name whose reports were posted with a key since dropped from API_KEYS.
    if (await this.hasReports(name)) throw new KeyNameInUseError(name, true);
    if (!(await this.store.putIfAbsent(claim, claimBody)) && !(await this.takeOverStoppedClaim(claim, claimBody))) throw new KeyNameInUseError(name);
    await this.store.putIfAbsent(`${API_KEYS_PREFIX}${digest}.json`, JSON.stringify(key));
  }

  /**
   * The name's claim counts its rotations: a rotation replaces it (If-Match over the version it
   * read, or If-None-Match where there is none) with the next number, which its key carries, and
   * revokes only keys of lower numbers (an added key, or one kept before rotations were counted,
   * is number 0). Of two rotations that read the same claim, the one whose write is refused keeps
   * nothing. Of two in turn, the later one revokes the earlier one's key, never the other way round;
   * an earlier one whose key was written after the later one looked finds the claim taken on and
   * revokes its own key (KeyRotationConflictError). So the last rotation's key is the one left.
   */
  async rotateKey(name: string, digest: string): Promise<number> {
    const claim = `${API_KEY_NAMES_PREFIX}${name}.json`;
    const [held, kept] = await Promise.all([this.store.get(claim), this.countedKeys()]);
    // Past the claim's count and every key's: a claim lost or rewritten (by hand, by a restore, or
    // taken over from an add that stopped) must not number a rotation below a key still working.
    const rotation = Math.max(held ? rotationOf(held.body) : 0, ...kept.filter((k) => k.name === name).map((k) => k.rotation ?? 0)) + 1;
    const key: CountedKey = { name, digest, created_at: new Date().toISOString(), rotation };
    const claimBody = JSON.stringify({ name, created_at: key.created_at, digest, rotation });
    const claimed = held ? await this.store.putIfMatch(claim, claimBody, held.etag) : await this.store.putIfAbsent(claim, claimBody);
    if (!claimed) throw new KeyRotationConflictError(name);
    await this.store.putIfAbsent(`${API_KEYS_PREFIX}${digest}.json`, JSON.stringify(key));
    const now = await this.store.get(claim);
    if (now && rotationOf(now.body) > rotation) {
      await this.revoke([key]);
      throw new KeyRotationConflictError(name);
    }
    const earlier = (await this.countedKeys()).filter((k) => k.name === name && k.digest !== digest && !k.revoked_at && (k.rotation ?? 0) < rotation);
    return this.revoke(earlier);
  }

  /**
   * A name's claim is written before its key (two objects, no transaction): an add that stopped
   * between them left a claim with no key, which would hold the name for good. Such a claim is
   * taken over once it is STOPPED_CLAIM_MS old and its key is still not there; a claim of an add
   * under way is left to it, and one that does not parse is left alone.
   */
  private async takeOverStoppedClaim(claim: string, claimBody: string): Promise<boolean> {
    const held = await this.store.get(claim);
    if (!held) return this.store.putIfAbsent(claim, claimBody);
    if (Date.now() - held.lastModified.getTime() < STOPPED_CLAIM_MS) return false;
    let claimed: { name: string; digest?: string };
    try {
      claimed = JSON.parse(held.body.toString('utf8')) as typeof claimed;
    } catch {
      return false;
    }
    const { name, digest } = claimed;
    // A claim from before claims named their key: the name's keys, listed, say whether it has one.
    const keyed = digest === undefined ? (await this.listKeys()).some((k) => k.name === name) : (await this.store.head(`${API_KEYS_PREFIX}${digest}.json`)) !== undefined;
    return !keyed && this.store.putIfMatch(claim, claimBody, held.etag);
  }

  async hasReports(name: string): Promise<boolean> {
    for (const prefix of partnerFolders(name)) {
      for await (const found of this.store.list({ prefix })) if (found) return true;
    }
    return false;
  }

  async revokeKeys(name: string): Promise<number> {
    return this.revoke((await this.countedKeys()).filter((k) => k.name === name && !k.revoked_at));
  }

  private async revoke(keys: readonly CountedKey[]): Promise<number> {
    const at = new Date().toISOString();
    await mapLimit(keys, 16, (k) => this.store.put(`${API_KEYS_PREFIX}${k.digest}.json`, JSON.stringify({ ...k, revoked_at: at })));
    return keys.length;
  }

  async listKeys(): Promise<StoredKey[]> {
    return (await this.countedKeys()).map(({ name, digest, created_at, revoked_at }) => ({ name, digest, created_at, ...(revoked_at && { revoked_at }) }));
  }

  /** Every kept key as stored, with its rotation's number. */
  private async countedKeys(): Promise<CountedKey[]> {
    const names: string[] = [];
    for await (const info of this.store.list({ prefix: API_KEYS_PREFIX })) names.push(info.key);
    const keys: CountedKey[] = [];
    await mapLimit(names, 16, async (name) => {
      const held = await this.store.get(name);
      if (held) keys.push(JSON.parse(held.body.toString('utf8')) as CountedKey);
    });
    // By name in byte order, as the SQLite ledger lists them (localeCompare puts '_' before '-'), then by age.
    return keys.sort((a, b) => byCodeUnits(a.name, b.name) || byCodeUnits(a.created_at, b.created_at));
  }

  async ping(): Promise<void> {
    await this.store.ping();
  }

  async close(): Promise<void> {}
}

/** A kept key as stored: with the number of the rotation that made it (none for an added key). */
interface CountedKey extends StoredKey {
  rotation?: number;
}

function storedKeyOf(body: Buffer): StoredKey {
  const { name, digest, created_at, revoked_at } = JSON.parse(body.toString('utf8')) as CountedKey;
  return { name, digest, created_at, ...(revoked_at && { revoked_at }) };
}

/** The rotations a name's claim counts; 0 for a claim of an add, or one that does not parse (written by hand). */
function rotationOf(claim: Buffer): number {
  try {
    const { rotation } = JSON.parse(claim.toString('utf8')) as { rotation?: unknown };
    return typeof rotation === 'number' && Number.isSafeInteger(rotation) && rotation > 0 ? rotation : 0;
  } catch {
    return 0;
  }
}

/** The `<source>-<post_id>` key's objects: reports of no partner, and every report accepted before post_ids were per partner. */
function sharedSlot(id: ReportId): PkeyParts {
  return { source: id.source, post_id: id.post_id };
}

/** The objects an acceptance looks for: its key and marker, and a partner's report the shared ones too. */
function objectsOf(slot: PkeyParts): string[] {
  const own = [idempotencyKey(slot), pendingKey(slot)];
  return slot.partner === undefined ? own : [...own, idempotencyKey(sharedSlot(slot)), pendingKey(sharedSlot(slot))];
}

/** The retraction an unpurged marker holds, when it holds one of `pkey`. */
function retractionIn(marker: { body: Buffer } | undefined, pkey: string): Retraction | undefined {
  try {
    const held = marker && (JSON.parse(marker.body.toString('utf8')) as Partial<Retraction>);
    const words = [held?.created_at, held?.retracted_at, held?.by, held?.reason];
    return held?.pkey === pkey && words.every((w) => typeof w === 'string') ? (held as Retraction) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a pending report, accepted at `acceptedMs` and last sent at `sentMs`, is sent again
 * now: once it has waited since its last sending as long as it had waited before it, and at
 * most eight periods (sent again after 1, 2, 4, 8, 16, 24… periods).
 */
export function sendsAgain({ nowMs, sentMs, acceptedMs, periodMs }: { nowMs: number; sentMs: number; acceptedMs: number; periodMs: number }): boolean {
  const waited = nowMs - sentMs;
  return waited >= periodMs && waited >= Math.min(sentMs - acceptedMs, 8 * periodMs);
}
