// The archive worker: receive → validate → tag → buffer → flush hourly
// Parquet parts → mark archived in the ledger → delete messages. The order of
// the last three steps is what makes a crash at any point lose nothing: parts
// are written before anything says "done", and re-delivered duplicates are
// dropped at read time and by compaction.
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { DuckDb } from '../archive/duckdb.js';
import { UnavailableError } from '../shared/errors.js';
import type { PendingLedger, QueueEnvelope, RetractionLedger } from '../ledger/ledger.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import { mapLimit } from '../ops/concurrency.js';
import { pause } from '../shared/pause.js';
import type { Queue, QueueMessage } from '../queue/queue.js';
import { closedBefore, DAY_MS, hourStart, partKeysOf } from '../store/layout.js';
import { parsePartnerReport } from '../partners/partnerReport.js';
import type { ObjectStore } from '../store/objectStore.js';
import { writeParquet } from '../archive/partWriter.js';
import { storePartPublisher, type PartPublisher } from '../archive/partPublisher.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import { tombstoneRow } from '../archive/schema.js';
import type { ArchiveEvents } from '../events/events.js';
import type { ChangeLog } from '../archive/changes.js';
import { archiveRowOf, retaggedRow } from '../ingest/archiveRow.js';

export interface WorkerDeps {
  store: ObjectStore;
  queue: Queue;
  /** Whether a redelivered report still waits, its marking as archived, and the window's retractions. */
  ledger: Pick<PendingLedger, 'isPending' | 'markArchived'> & Pick<RetractionLedger, 'retractions'>;
  boundaries: BoundaryRepository;
  db: DuckDb;
  tmpDir: string;
  log: Logger;
  metrics?: Metrics;
  /** Told of each flush's reports once their parts are durable (webhooks, stream, SNS). */
  events?: ArchiveEvents;
  /** The index of what changed when (updated_after), written once the parts are durable. */
  changes?: ChangeLog;
  /** Stores parts with their sidecars; by default in `store`, the sidecars built by `db`. */
  parts?: PartPublisher;
}

export interface WorkerOptions {
  flushIntervalSeconds: number;
  maxBufferedReports: number;
  /** How long a received message stays hidden: long enough to survive until its flush. */
  visibilitySeconds: number;
}

interface Buffered {
  row: ArchiveRow;
  receipts: string[];
  /** When its receipts were last hidden for the visibility timeout (received, or kept hidden since). */
  hiddenSince: number;
}

export interface FlushResult {
  reports: number;
  parts: string[];
}

/** Parts written at once by a flush that touches many hours. */
const PART_WRITES_AT_ONCE = 4;

/** The parts a flush writes (see partKeysOf): each with its rows. */
function partsOfFlush(byHour: ReadonlyMap<number, ArchiveRow[]>, closedBeforeMs: number): { key: string; rows: ArchiveRow[] }[] {
  const keys = partKeysOf(byHour.keys(), closedBeforeMs);
  const parts = new Map<string, ArchiveRow[]>();
  for (const [hour, rows] of byHour) {
    const key = keys.get(hour)!;
    const held = parts.get(key);
    if (held) held.push(...rows);
    else parts.set(key, [...rows]);
  }
  return [...parts].map(([key, rows]) => ({ key, rows }));
}

export class Worker {
  private readonly buffer = new Map<string, Buffered>();
  private firstBufferedAt: number | undefined;
  private running: Promise<void> | undefined;
  private stopping = false;
  /** Ends the current long poll when stop() is called, instead of waiting it out. */
  private polling = new AbortController();
  private failures = 0;
  /**
   * How many buffered reports the next flush takes: all of them, until a flush fails; then half
   * as many after each failure, and twice as many after each success, back up to all.
   */
  private flushStep = Infinity;
  /**
   * The partitions (hour or day folders) this worker wrote a part to, and when. Ready texts
   * serve an hour that is one part; a second part makes readers de-duplicate with the query
   * engine until compaction merges them (with texts of its own). So only a partition's first
   * part here gets them: the parts of an hour flushed every few seconds would otherwise each
   * store every text format of their reports, several times the reports' size.
   */
  private readonly partitionsWritten = new Map<string, number>();

  /** Where parts are stored, with their sidecars. */
  private readonly parts: PartPublisher;
  /** Keeps the buffered reports' messages hidden while they wait for (or are in) a flush. */
  private hiding: NodeJS.Timeout | undefined;
  private extending: Promise<void> | undefined;

  constructor(
    private readonly deps: WorkerDeps,
    private readonly options: WorkerOptions,
  ) {
    this.parts = deps.parts ?? storePartPublisher(deps);
  }

  get buffered(): number {
    return this.buffer.size;
  }

  start(): void {
    if (this.running) return;
    this.stopping = false;
    this.polling = new AbortController();
    this.running = this.loop();
    this.hiding ??= setInterval(() => this.keepHidden(), Math.max(250, (this.options.visibilitySeconds * 1000) / 4));
    this.hiding.unref();
  }

  /**
   * Hides again, for the whole visibility timeout, the messages of reports buffered for half of
   * it: a slow flush (a backlog, a store that keeps failing) would otherwise let them come back to
   * another worker, each return a receive counted towards the dead-letter queue.
   */
  private keepHidden(): void {
    if (this.extending) return;
    const now = Date.now();
    const due = [...this.buffer.values()].filter((e) => now - e.hiddenSince >= (this.options.visibilitySeconds * 1000) / 2);
    if (due.length === 0) return;
    this.extending = this.deps.queue
      .extend(due.flatMap((e) => e.receipts), this.options.visibilitySeconds)
      .then(() => {
        for (const e of due) e.hiddenSince = now;
      })
      .catch((err: unknown) => this.deps.log.warn({ err: describe(err), reports: due.length }, 'could not keep buffered messages hidden; they may come back before their flush'))
      .finally(() => (this.extending = undefined));
  }

  /**
   * Ends the long poll at once, takes one batch of what is already waiting (a report posted just
   * before Ctrl-C is archived now rather than at the next start), flushes, and resolves (SIGTERM path).
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.polling.abort();
    await this.running;
    this.running = undefined;
    try {
      await this.pollOnce(0, null);
    } catch (err) {
      this.deps.log.warn({ err: describe(err) }, 'last receive before stopping failed; the queue keeps those reports');
    }
    try {
      while (this.buffer.size > 0) await this.flush();
    } finally {
      // Unless started again meanwhile: its loop's messages are kept hidden by the same timer.
      if (!this.running) {
        clearInterval(this.hiding);
        this.hiding = undefined;
      }
      await this.extending;
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        if (this.flushDue()) await this.flush();
        if (this.stopping) break;
        if (this.buffer.size >= this.options.maxBufferedReports) continue; // still full after a partial flush: flush again first
        await this.pollOnce(this.waitSeconds());
        this.failures = 0;
      } catch (err) {
        this.failures += 1;
        const delay = Math.min(30_000, 500 * 2 ** Math.min(this.failures, 6));
        this.deps.log.warn({ err: describe(err), retryInMs: delay }, 'worker step failed; retrying');
        await pause(delay, this.polling.signal);
      }
    }
  }

  private flushDue(): boolean {
    if (this.buffer.size === 0) return false;
    if (this.buffer.size >= this.options.maxBufferedReports) return true;
    return Date.now() - (this.firstBufferedAt ?? Date.now()) >= this.options.flushIntervalSeconds * 1000;
  }

  private waitSeconds(): number {
    if (this.buffer.size === 0 || this.firstBufferedAt === undefined) return 5;
    const left = this.firstBufferedAt + this.options.flushIntervalSeconds * 1000 - Date.now();
    return Math.max(0, Math.min(5, left / 1000));
  }

  /** Receives one batch and buffers what is valid. Returns how many messages arrived. */
  async pollOnce(waitSeconds = 0, signal: AbortSignal | null = this.polling.signal): Promise<number> {
    // Their visibility runs from the receive: counted from before it, never later.
    const receivedAt = Date.now();
    const messages = await this.deps.queue.receive({
      // SQS gives at most 10 a call; the SQLite queue takes a larger batch in one transaction.
      maxMessages: 200,
      waitSeconds,
      visibilitySeconds: this.options.visibilitySeconds,
      ...(signal && { signal }),
    });
    if (messages.length === 0) return 0;
    const boundaries = await this.deps.boundaries.current();
    const taken: { message: QueueMessage; row: ArchiveRow; redelivered: boolean }[] = [];
    for (const message of messages) {
      const read = await this.read(message, boundaries);
      if (read) taken.push({ message, ...read });
    }
    // A redelivery of a report no longer pending was archived by an earlier flush. The batch's
    // redeliveries are looked up at once: on S3 that is one round trip, not one per message.
    const asked = [...new Set(taken.filter((t) => t.redelivered && !this.buffer.has(t.row.pkey)).map((t) => t.row.pkey))];
    const pending = new Map(await mapLimit(asked, 16, async (pkey) => [pkey, await this.deps.ledger.isPending(pkey)] as const));
    const done: string[] = [];
    for (const { message, row, redelivered } of taken) {
      const existing = this.buffer.get(row.pkey);
      if (existing) existing.receipts.push(message.receipt);
      else if (redelivered && pending.get(row.pkey) === false) done.push(message.receipt);
      else {
        if (this.buffer.size === 0) this.firstBufferedAt = Date.now();
        this.buffer.set(row.pkey, { row, receipts: [message.receipt], hiddenSince: receivedAt });
      }
    }
    if (done.length > 0) await this.deps.queue.delete(done);
    return messages.length;
  }

  /** A message's archive row, and whether it came before; undefined for a poison message (left to come back, then to the DLQ). */
  private async read(
    message: QueueMessage,
    boundaries: Awaited<ReturnType<BoundaryRepository['current']>>,
  ): Promise<{ row: ArchiveRow; redelivered: boolean } | undefined> {
    let envelope: QueueEnvelope;
    let row: ArchiveRow;
    try {
      envelope = JSON.parse(message.body) as QueueEnvelope;
      if (envelope?.v !== 1 || typeof envelope.pkey !== 'string' || typeof envelope.source !== 'string') {
        throw new Error('not an ingest record');
      }
      const report = parsePartnerReport(
        {
          post_id: envelope.report.post_id,
          created_at: envelope.report.created_at,
          partner_city: envelope.report.partner_city,
          disaster_type: envelope.report.disaster_type,
          location: envelope.report.location,
          ...(envelope.report.title !== null && { title: envelope.report.title }),
          ...(envelope.report.text !== null && { text: envelope.report.text }),
          ...(envelope.report.image_url !== null && { image_url: envelope.report.image_url }),
        },
        Date.parse(envelope.received_at),
      );
      row = archiveRowOf({ ...envelope, report }, boundaries.tagger.tag(report.location.lng, report.location.lat), boundaries.version);
    } catch (err) {
      // Poison message: leave it to come back a few times, then to the dead-letter queue.
      this.deps.log.warn({ messageId: message.id, receiveCount: message.receiveCount, err: describe(err) }, 'rejected queue message');
      // Back off on the flush cadence, doubling: a poison message reaches the DLQ in a few intervals.
      const backoff = Math.min(60, Math.ceil(this.options.flushIntervalSeconds * 2 ** (message.receiveCount - 1)));
      // A refused change (throttled, an expired receipt) leaves the message to come back on its
      // own time: the batch's other messages are read all the same.
      await this.deps.queue.changeVisibility(message.receipt, backoff).catch((err: unknown) => this.deps.log.warn({ messageId: message.id, err: describe(err) }, 'could not delay a rejected queue message'));
      return undefined;
    }
    return { row, redelivered: envelope.redelivery === true || message.receiveCount > 1 };
  }

  /**
   * Reports tagged when received with boundaries since replaced (published while they waited in
   * the buffer) are tagged again with the current ones: a reprocess run after the publish may
   * have rewritten their hour already, and would leave their old tags for good. The version
   * published now, read afresh (as a job reads it), not as this process last looked: that may be
   * 5 s old and the new version still loading, while a reprocess of a day takes less. A version
   * that cannot be loaded (told once by the repository) leaves the one this process serves, as
   * requests do; so does a pointer that cannot be read.
   */
  private async retagStale(entries: Buffered[]): Promise<void> {
    const boundaries = await this.deps.boundaries.published().catch(() => this.deps.boundaries.current());
    for (const entry of entries) {
      const { row } = entry;
      if (row.boundary_version !== boundaries.version) entry.row = retaggedRow(row, boundaries.tagger.tag(row.lng, row.lat), boundaries.version);
    }
  }

  /**
   * Reports retracted while they waited in the queue are written as tombstones (status
   * retracted, title and text "", URLs null), so their personal fields never reach a part.
   * They stay "unpurged" in the ledger: the purge job confirms no other copy holds them (a
   * crash may have repeated a flush) before it marks them purged. A copy arriving after the
   * purge is a tombstone too. Returns the pkeys this call made tombstones.
   */
  private async tombstoneRetracted(entries: Buffered[]): Promise<Set<string>> {
    let fromMs = Infinity;
    let toMs = -Infinity;
    for (const { row } of entries) {
      fromMs = Math.min(fromMs, row.created_at_ms);
      toMs = Math.max(toMs, row.created_at_ms);
    }
    const retracted = new Set<string>();
    // Purged ones too: a late copy (a duplicate message, a flush repeated after a crash) of a
    // report whose retraction was purged would be the newest copy, personal fields and all.
    for await (const r of this.deps.ledger.retractions({ createdFromMs: fromMs, createdToMs: toMs, unpurgedOnly: false })) retracted.add(r.pkey);
    const tombstoned = new Set<string>();
    for (const entry of entries) {
      if (!retracted.has(entry.row.pkey) || entry.row.status === 'retracted') continue;
      entry.row = tombstoneRow(entry.row);
      tombstoned.add(entry.row.pkey);
    }
    return tombstoned;
  }

  /** Writes one part per hour touched, then acknowledges. */
  async flush(): Promise<FlushResult> {
    const entries = [...this.buffer.values()].slice(0, this.flushStep);
    if (entries.length === 0) return { reports: 0, parts: [] };
    try {
      const result = await this.flushEntries(entries);
      this.flushStep = this.flushStep * 2 >= this.buffer.size ? Infinity : this.flushStep * 2;
      return result;
    } catch (err) {
      // A nearly full disk (or a store refusing large writes) still lets small flushes through.
      this.flushStep = Math.max(1, Math.floor(entries.length / 2));
      throw err;
    }
  }

  private async flushEntries(entries: Buffered[]): Promise<FlushResult> {
    const started = Date.now();
    await this.retagStale(entries);
    await this.tombstoneRetracted(entries);
    const byHour = new Map<number, ArchiveRow[]>();
    for (const { row } of entries) {
      const hour = hourStart(row.created_at_ms);
      let rows = byHour.get(hour);
      if (!rows) byHour.set(hour, (rows = []));
      rows.push(row);
    }
    const groups = partsOfFlush(byHour, closedBefore(this.options.flushIntervalSeconds));
    await fs.mkdir(this.deps.tmpDir, { recursive: true });
    /** The parts written with ready texts: written again, they are too (or the old ones would stand beside them). */
    const withTexts = new Set<string>();
    const write = async ({ key, rows }: { key: string; rows: ArchiveRow[] }, again = false): Promise<string> => {
      const file = path.join(this.deps.tmpDir, `flush-${randomUUID()}.parquet`);
      try {
        await writeParquet(this.deps.db, rows, file);
        // The part, its stats and (the partition's first here) its ready texts.
        const partition = key.slice(0, key.lastIndexOf('/'));
        const readyTexts = again ? withTexts.has(key) : !this.partitionsWritten.has(partition);
        if (readyTexts) withTexts.add(key);
        const { body } = await this.parts.publish(key, file, { readyTexts });
        this.partitionsWritten.set(partition, Date.now());
        this.deps.metrics?.partBytes.observe(body.length);
        return key;
      } finally {
        await fs.rm(file, { force: true });
      }
    };
    // A backlog (a backfill, or the queue after an outage) touches many hours per flush: their
    // parts are written a few at a time, as store puts wait on the disk or the network.
    const parts = await mapLimit(groups, PART_WRITES_AT_ONCE, (group) => write(group));
    // A retraction made while the parts were written: a copy of a report archived before (a
    // redelivery) is not pending, so a purge meanwhile may have marked it purged without this
    // part; readers would then show it whole. Its part is written again with it as a tombstone.
    const late = await this.tombstoneRetracted(entries);
    if (late.size > 0) {
      const again = groups.filter(({ rows }) => rows.some((r) => late.has(r.pkey)));
      await mapLimit(again, PART_WRITES_AT_ONCE, ({ key, rows }) => write({ key, rows: rows.map((r) => (late.has(r.pkey) ? tombstoneRow(r) : r)) }, true));
    }
    // Before the ledger says "archived": a crash in between repeats the flush, and the events
    // are recorded once per report whatever repeats.
    await this.deps.changes?.record(entries.map((e) => ({ pkey: e.row.pkey, createdMs: e.row.created_at_ms })));
    // A report retracted before it was archived is announced by its retraction alone.
    await this.deps.events?.archived(entries.filter((e) => e.row.status !== 'retracted').map((e) => e.row));
    await this.deps.ledger.markArchived(entries.map((e) => e.row.pkey));
    // Archived: out of the buffer whatever the delete does, or a failed delete had every retry
    // write the flush again. A message left undeleted comes back and is dropped, its report no
    // longer pending.
    const partial = this.buffer.size > entries.length;
    for (const e of entries) this.buffer.delete(e.row.pkey);
    try {
      await this.deps.queue.delete(entries.flatMap((e) => e.receipts));
    } catch (err) {
      this.deps.log.warn({ err: describe(err), reports: entries.length }, 'archived, but their messages could not be deleted: they come back and are dropped');
    }
    for (const [partition, at] of this.partitionsWritten) if (at < started - 2 * DAY_MS) this.partitionsWritten.delete(partition);
    // What a partial flush left is due at once; what arrived meanwhile waits its interval.
    this.firstBufferedAt = this.buffer.size === 0 ? undefined : partial ? this.firstBufferedAt : Date.now();
    this.deps.metrics?.flushDuration.observe((Date.now() - started) / 1000);
    this.deps.metrics?.flushedReports.inc(entries.length);
    this.deps.log.info({ reports: entries.length, parts: parts.length, ms: Date.now() - started }, 'flushed');
    return { reports: entries.length, parts };
  }
}

function describe(err: unknown): string {
  if (err instanceof UnavailableError) return `${err.dependency} unavailable: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

