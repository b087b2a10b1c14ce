// The ledger on an object store (S3): a pending marker per accepted, not yet archived report,
// and an idempotency key per (source, post_id) holding its first version, both created with
// a conditional PUT (If-None-Match: *, which S3, LocalStack, MinIO and moto enforce).
//
// Order of writes on acceptance:
//   1. the marker (holds the record): once it exists the report is accepted;
//   2. the key, from the same bytes: it alone says "already exists" ever after;
//   3. the queue message.
// A crash between 1 and 2 is rolled forward by reconciliation (the key from the marker);
// a failed 3 too (the marker outlives its message).
import {
  API_KEYS_PREFIX,
  IDEMPOTENCY_PREFIX,
  idempotencyKey,
  keyOfMarker,
  parseRetractionName,
  pendingKey,
  PENDING_PREFIX,
  retractionName,
  RETRACTIONS_PREFIX,
  UNPURGED_PREFIX,
} from '../reports/layout.js';
import type { Queue } from '../queue/queue.js';
import type { ObjectStore } from '../store/objectStore.js';
import { mapLimit } from '../ops/concurrency.js';
import {
  idOfPkey,
  parseRecord,
  type AcceptedReport,
  type AcceptResult,
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

export class ObjectLedger implements IngestLedger {
  readonly description: string;

  constructor(
    private readonly store: ObjectStore,
    private readonly queue: Queue,
  ) {
    this.description = `${store.description} (ingest/)`;
  }

  async accept(record: IngestRecord): Promise<AcceptResult> {
    const { pkey } = record;
    const key = idempotencyKey(record.source, record.post_id);
    if (await this.store.head(key)) return { created: false, pkey };
    const body = JSON.stringify(record);
    if (!(await this.store.putIfAbsent(pendingKey(record.source, record.post_id), body))) return { created: false, pkey };
    // Lost only to an acceptance archived since the HEAD above: ours is then a repeat, and
    // its marker is left for reconciliation, which sends the key's (first) version again.
    if (!(await this.store.putIfAbsent(key, body))) return { created: false, pkey };
    await this.queue.send([body]);
    return { created: true, pkey };
  }

  async get(id: ReportId): Promise<IngestRecord | undefined> {
    const key = await this.store.get(idempotencyKey(id.source, id.post_id));
    if (key) return parseRecord(key.body);
    // Accepted, its key lost in a crash before reconciliation rebuilt it.
    const marker = await this.store.get(pendingKey(id.source, id.post_id));
    return marker && parseRecord(marker.body);
  }

  async isPending(id: ReportId): Promise<boolean> {
    return (await this.store.head(pendingKey(id.source, id.post_id))) !== undefined;
  }

  async markArchived(ids: readonly ReportId[]): Promise<void> {
    await this.store.delete(ids.map((id) => pendingKey(id.source, id.post_id)));
  }

  async requeueStale(beforeMs: number): Promise<number> {
    let requeued = 0;
    let batch: { marker: string; record: IngestRecord }[] = [];
    const send = async () => {
      if (batch.length === 0) return;
      await this.queue.send(batch.map((b) => JSON.stringify({ ...b.record, redelivery: true } satisfies QueueEnvelope)));
      // Rewriting the marker restarts its age: one outage yields one re-enqueue, not one per run.
      await mapLimit(batch, 16, (b) => this.store.put(b.marker, JSON.stringify(b.record)));
      requeued += batch.length;
      batch = [];
    };
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) {
      if (info.lastModified.getTime() >= beforeMs) continue;
      const record = await this.recordOf(info.key);
      if (!record) continue;
      batch.push({ marker: info.key, record });
      if (batch.length >= 100) await send();
    }
    await send();
    return requeued;
  }

  /**
   * The record a marker stands for, its key in place (rolled forward from the marker when a
   * crash lost it). The key's version wins: it is the first one accepted. Undefined when the
   * marker was cleared since it was listed.
   */
  private async recordOf(marker: string): Promise<IngestRecord | undefined> {
    const held = await this.store.get(marker);
    if (!held) return undefined;
    const fromMarker = parseRecord(held.body);
    const key = keyOfMarker(marker);
    if (fromMarker) await this.store.putIfAbsent(key, held.body);
    const stored = await this.store.get(key);
    return (stored && parseRecord(stored.body)) ?? fromMarker;
  }

  async *accepted(fromMs: number, toMs: number): AsyncIterable<AcceptedReport> {
    const pending = new Set<string>();
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) pending.add(keyOfMarker(info.key));
    const keys: string[] = [];
    for await (const info of this.store.list({ prefix: IDEMPOTENCY_PREFIX })) keys.push(info.key);
    const found: AcceptedReport[] = [];
    await mapLimit(keys, 16, async (key) => {
      const obj = await this.store.get(key);
      const record = obj && parseRecord(obj.body);
      if (!record) return;
      const createdMs = Date.parse(record.report.created_at);
      if (createdMs < fromMs || createdMs > toMs) return;
      found.push({ pkey: record.pkey, created_at: new Date(createdMs).toISOString(), pending: pending.has(key) });
    });
    yield* found;
  }

  async lookup(pkey: string): Promise<LedgerEntry | undefined> {
    const id = idOfPkey(pkey);
    const record = id && (await this.get(id));
    if (!id || !record || record.pkey !== pkey) return undefined;
    const [pending, retraction] = await Promise.all([this.isPending(id), this.retractionOf(record)]);
    return { record, pending, state: retraction ? 'retracted' : 'confirmed', ...(retraction && { retraction }) };
  }

  private async retractionOf(record: IngestRecord): Promise<Retraction | undefined> {
    const held = await this.store.get(RETRACTIONS_PREFIX + retractionName(Date.parse(record.report.created_at), record.pkey));
    return held && (JSON.parse(held.body.toString('utf8')) as Retraction);
  }

  /**
   * The unpurged marker first (readers hide the report from then on), then the retraction
   * (If-None-Match: the first one stays). A crash between them leaves the report hidden and
   * the partner without an answer: its retry completes the retraction.
   */
  async retract(pkey: string, by: string, reason: string): Promise<RetractResult> {
    const entry = await this.lookup(pkey);
    if (!entry) return { found: false };
    if (entry.retraction) return { found: true, first: false, retraction: entry.retraction };
    const createdMs = Date.parse(entry.record.report.created_at);
    const retraction: Retraction = { pkey, created_at: new Date(createdMs).toISOString(), retracted_at: new Date().toISOString(), by, reason };
    const body = JSON.stringify(retraction);
    await this.store.putIfAbsent(UNPURGED_PREFIX + retractionName(createdMs, pkey), body);
    if (await this.store.putIfAbsent(RETRACTIONS_PREFIX + retractionName(createdMs, pkey), body)) return { found: true, first: true, retraction };
    return { found: true, first: false, retraction: (await this.retractionOf(entry.record)) ?? retraction };
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

  async markPurged(pkeys: readonly string[]): Promise<void> {
    const markers: string[] = [];
    await mapLimit(pkeys, 16, async (pkey) => {
      const id = idOfPkey(pkey);
      const record = id && (await this.get(id));
      if (record) markers.push(UNPURGED_PREFIX + retractionName(Date.parse(record.report.created_at), pkey));
    });
    await this.store.delete(markers);
  }

  async keyByDigest(digest: string): Promise<StoredKey | undefined> {
    if (!/^[0-9a-f]{64}$/.test(digest)) return undefined;
    const held = await this.store.get(`${API_KEYS_PREFIX}${digest}.json`);
    return held && (JSON.parse(held.body.toString('utf8')) as StoredKey);
  }

  async addKey(name: string, digest: string): Promise<void> {
    const key: StoredKey = { name, digest, created_at: new Date().toISOString() };
    await this.store.putIfAbsent(`${API_KEYS_PREFIX}${digest}.json`, JSON.stringify(key));
  }

  async revokeKeys(name: string, keep?: string): Promise<number> {
    const revoked = (await this.listKeys()).filter((k) => k.name === name && k.digest !== keep && !k.revoked_at);
    const at = new Date().toISOString();
    await mapLimit(revoked, 16, (k) => this.store.put(`${API_KEYS_PREFIX}${k.digest}.json`, JSON.stringify({ ...k, revoked_at: at })));
    return revoked.length;
  }

  async listKeys(): Promise<StoredKey[]> {
    const names: string[] = [];
    for await (const info of this.store.list({ prefix: API_KEYS_PREFIX })) names.push(info.key);
    const keys: StoredKey[] = [];
    await mapLimit(names, 16, async (name) => {
      const held = await this.store.get(name);
      if (held) keys.push(JSON.parse(held.body.toString('utf8')) as StoredKey);
    });
    return keys.sort((a, b) => a.name.localeCompare(b.name) || a.created_at.localeCompare(b.created_at));
  }

  async ping(): Promise<void> {
    await this.store.ping();
  }

  close(): void {}
}
