// One contract, every adapter of the ingest ledger: SQLite (embedded), and objects with
// If-None-Match on S3 (fauxqs; moto where installed, which enforces the condition, so the
// race of two first acceptances is decided there as on S3).
import { randomBytes } from 'node:crypto';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bootstrap } from '../../src/main/bootstrap.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import { KeyNameInUseError, KeyRotationConflictError, PkeyTakenError, type IngestLedger, type IngestRecord } from '../../src/ledger/ledger.js';
import { ObjectLedger } from '../../src/ledger/objectLedger.js';
import { SqliteLedger } from '../../src/ledger/sqliteLedger.js';
import type { Queue } from '../../src/queue/queue.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import { SqsQueue } from '../../src/queue/sqsQueue.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import type { ListOptions } from '../../src/store/objectStore.js';
import { UnavailableError } from '../../src/shared/errors.js';
import { API_KEY_NAMES_PREFIX, API_KEYS_PREFIX, IDEMPOTENCY_PREFIX } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
import { acceptHeld, report, tempDir, testConfig } from '../support/env.js';

let fauxqs: Emulator;
let moto: Emulator | undefined;
beforeAll(async () => {
  fauxqs = await startEmulator();
  if (HAS_MOTO) moto = await startMoto();
});
afterAll(async () => {
  await fauxqs.stop();
  await moto?.stop();
});
if (!HAS_MOTO) console.warn(MOTO_MISSING);

interface Made {
  /** Two ledgers on the same storage, as two API processes have. */
  ledgers: [IngestLedger, IngestLedger];
  queue: Queue;
  /** Every stored object's bytes, one after another (a ledger on an object store). */
  stored?: () => Promise<string>;
}

/** A configuration bootstrapped on `peer`, and a bucket of its own. */
async function freshBucket(peer: Emulator, name: string, env: Record<string, string> = {}): Promise<{ config: Awaited<ReturnType<typeof testConfig>>; bucket: string }> {
  const config = await testConfig('aws', peer, env);
  await bootstrap(config, { s3: peer.s3, sqs: peer.sqs });
  const bucket = `${name}-${randomBytes(4).toString('hex')}`;
  await peer.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  return { config, bucket };
}

async function onS3(peer: Emulator, queueUrl: (e: Emulator) => Record<string, string>): Promise<Made> {
  const { config, bucket } = await freshBucket(peer, 'ledger', queueUrl(peer));
  const queue = new SqsQueue(peer.sqs, config.queueUrl);
  // Any hold renewed, however near its end (the tests' holds last a fraction of a second).
  const store = new S3ObjectStore(peer.s3, { bucket, prefix: 'flood/' });
  const ledger = () => new ObjectLedger(new S3ObjectStore(peer.s3, { bucket, prefix: 'flood/' }), queue, 0);
  const stored = async () => {
    const bodies: string[] = [];
    for await (const info of store.list({ prefix: '' })) bodies.push((await store.get(info.key))?.body.toString('utf8') ?? '');
    return bodies.join('\n');
  };
  return { ledgers: [ledger(), ledger()], queue, stored };
}

const adapters: { name: string; enforcesConditions: boolean; make: () => Promise<Made> }[] = [
  {
    name: 'sqlite',
    enforcesConditions: true,
    make: async () => {
      const dir = await tempDir();
      const ledger = () => {
        const db = openLedgerDb(dir);
        return new SqliteLedger(db, new SqliteQueue(db, 5));
      };
      const db = openLedgerDb(dir);
      return { ledgers: [ledger(), ledger()], queue: new SqliteQueue(db, 5) };
    },
  },
  // fauxqs ignores If-None-Match: it keeps the contract except the race.
  { name: 'objects on fauxqs', enforcesConditions: false, make: () => onS3(fauxqs, () => ({})) },
  ...(HAS_MOTO
    ? [{ name: 'objects on moto', enforcesConditions: true, make: () => onS3(moto!, (e: Emulator) => ({ QUEUE_URL: e.queueUrl(`reports-${randomBytes(4).toString('hex')}`) })) }]
    : []),
];

const record = (id: number, title: string): IngestRecord => ({
  v: 1,
  pkey: `partner-${id}`,
  source: 'partner',
  post_id: id,
  received_at: new Date().toISOString(),
  report: parsePartnerReport(report(id, { title, created_at: '2026-11-21T05:00:00Z' }), Date.now()),
});

/** A partner's report, as the intake makes it: its pkey names the partner. */
const partners = (partner: string, id: number, title: string): IngestRecord => ({ ...record(id, title), pkey: `partner-${partner}-${id}`, partner });

/** A partner's report as releases before per-partner post_ids wrote it: the shared pkey form, the partner in the record. */
const older = (partner: string, id: number, title: string): IngestRecord => ({ ...record(id, title), partner });

async function drain(queue: Queue): Promise<string[]> {
  const bodies: string[] = [];
  for (let i = 0; i < 10; i++) {
    const got = await queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 60 });
    if (got.length === 0) break;
    bodies.push(...got.map((m) => m.body));
    await queue.delete(got.map((m) => m.receipt));
  }
  return bodies;
}

describe.each(adapters)('ingest ledger contract: $name', ({ make, enforcesConditions }) => {
  it('accepts a post_id once, keeps its first version, queues it, and tracks it until archived', async () => {
    const { ledgers: [ledger], queue } = await make();
    const id = { source: 'partner', post_id: 1 };
    const pkey = 'partner-1';
    expect(await ledger.accept(record(1, 'first'))).toEqual({ created: true, pkey: 'partner-1' });
    expect(await ledger.accept(record(1, 'second'))).toEqual({ created: false, pkey: 'partner-1' });
    expect((await ledger.get(id))!.record!.report.title).toBe('first');
    expect(await ledger.get({ source: 'partner', post_id: 2 })).toBeUndefined();
    expect((await drain(queue)).map((b) => JSON.parse(b).report.title)).toEqual(['first']);
    expect(await ledger.isPending(pkey)).toBe(true);
    const listed = [];
    for await (const page of ledger.accepted(Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22))) listed.push(...page);
    expect(listed).toEqual([{ pkey: 'partner-1', createdMs: Date.parse('2026-11-21T05:00:00.000Z'), pending: true }]);
    await ledger.markArchived([pkey]);
    expect(await ledger.isPending(pkey)).toBe(false);
    expect(await ledger.accept(record(1, 'third'))).toEqual({ created: false, pkey: 'partner-1' });
  });

  it('queues again a pending report whose message is gone, with its first version, once per period', async () => {
    const { ledgers: [ledger], queue } = await make();
    await ledger.accept(record(3, 'first'));
    await drain(queue);
    expect(await ledger.requeueStale(Date.now() + 1_000)).toBe(1);
    const again = (await drain(queue)).map((b) => JSON.parse(b));
    expect(again.map((e) => [e.pkey, e.report.title, e.redelivery])).toEqual([['partner-3', 'first', true]]);
    expect(await ledger.requeueStale(Date.now() - 60_000)).toBe(0);
    await ledger.markArchived(['partner-3']);
    expect(await ledger.requeueStale(Date.now() + 60_000)).toBe(0);
  });

  it('does not send a report again while its message may still be queued; once the queue is empty, it does', async () => {
    const { ledgers: [ledger], queue } = await make();
    const period = 1_000;
    const stale = () => ledger.requeueStale(Date.now() - period);
    await ledger.accept(record(4, 'first'));
    await drain(queue);
    // Pending five seconds, its message lost: sent again.
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await stale()).toBe(1);
    // More than a period later, its new message not yet received (workers down, or behind).
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await stale()).toBe(0);
    // That message lost too, and nothing else queued: sent again at once.
    expect((await drain(queue)).map((b) => JSON.parse(b).pkey)).toEqual(['partner-4']);
    expect(await stale()).toBe(1);
  });

  it("renews an import's hold only on the reports it still holds: those archived, queued once their hold ran out, or never accepted are given back", async () => {
    const { ledgers: [ledger, other], queue } = await make();
    const minutes = (n: number) => Date.now() + n * 60_000;
    // Holds of 3 s: long enough for the calls between an acceptance and its renewal on a busy
    // host (0.3 s ran out first on moto once), and waited out below.
    const heldUntil = Date.now() + 3_000;
    await acceptHeld(ledger, [record(62, 'ran out')], heldUntil);
    await acceptHeld(ledger, [record(61, 'archived')], minutes(10));
    await ledger.markArchived(['partner-61']);
    await acceptHeld(ledger, [record(60, 'held')], heldUntil);
    // From another process, as a resumed import is: the renewed hold outlasts the first.
    expect(await other.renewHolds(['partner-60'], minutes(10))).toEqual([]);
    await new Promise((r) => setTimeout(r, Math.max(0, heldUntil - Date.now()) + 100));
    expect(await ledger.requeueStale(Date.now())).toBe(1);
    expect((await drain(queue)).map((b) => JSON.parse(b).pkey)).toEqual(['partner-62']);
    expect((await other.renewHolds(['partner-60', 'partner-61', 'partner-62', 'partner-63'], minutes(20))).sort()).toEqual(['partner-61', 'partner-62', 'partner-63']);
    const [again] = await acceptHeld(ledger, [record(60, 'later')], minutes(10));
    expect(again).toMatchObject({ created: false, pkey: 'partner-60', held: { report: { title: 'held' } } });
  });

  it('retracts a report once: its state, the first retraction kept, listed by created_at until purged', async () => {
    const { ledgers: [ledger, other], stored } = await make();
    await ledger.accept(older('alpha', 20, 'to retract'));
    await ledger.accept(record(21, 'kept'));
    const entry = await other.lookup('partner-20');
    expect(entry).toMatchObject({ state: 'confirmed', pending: true, record: { partner: 'alpha', report: { title: 'to retract' } } });
    expect(entry!.retraction).toBeUndefined();
    expect(await ledger.lookup('partner-99')).toBeUndefined();
    expect(await ledger.retract('partner-99', 'alpha', 'spam')).toEqual({ found: false });

    const first = await ledger.retract('partner-20', 'alpha', 'exposes a person');
    expect(first).toMatchObject({ found: true, first: true, retraction: { pkey: 'partner-20', created_at: '2026-11-21T05:00:00.000Z', by: 'alpha', reason: 'exposes a person' } });
    // The other process sees it at once; a repeat keeps the first retraction.
    const again = await other.retract('partner-20', 'ops', 'again');
    expect(again).toEqual({ found: true, first: false, retraction: (first as { retraction: unknown }).retraction });
    expect(await other.lookup('partner-20')).toMatchObject({ state: 'retracted', retraction: { by: 'alpha', reason: 'exposes a person' } });
    expect((await other.lookup('partner-21'))!.state).toBe('confirmed');

    const list = async (filter: Parameters<IngestLedger['retractions']>[0]) => {
      const out = [];
      for await (const r of other.retractions(filter)) out.push(r.pkey);
      return out;
    };
    const day = { createdFromMs: Date.UTC(2026, 10, 21), createdToMs: Date.UTC(2026, 10, 21, 23, 59, 59, 999) };
    expect(await list(day)).toEqual(['partner-20']);
    expect(await list({ ...day, unpurgedOnly: true })).toEqual(['partner-20']);
    expect(await list({ createdFromMs: Date.UTC(2026, 10, 21, 5, 0, 0, 1) })).toEqual([]);
    expect(await list({ createdToMs: Date.UTC(2026, 10, 21, 4, 59, 59, 999) })).toEqual([]);
    // Purged once archived (its parts rewritten): the ledger keeps its first version for
    // idempotency, without the personal fields.
    await ledger.markArchived(['partner-20']);
    await ledger.markPurged(['partner-20']);
    expect((await other.lookup('partner-20'))?.record?.report ?? {}).not.toMatchObject({ title: 'to retract' });
    if (stored) expect(await stored()).not.toContain('to retract');
    expect(await list({ ...day, unpurgedOnly: true })).toEqual([]);
    expect(await list(day)).toEqual(['partner-20']);
    // The accepted version is still there (idempotency), its state retracted for good.
    expect(await ledger.accept(partners('alpha', 20, 'repost'))).toEqual({ created: false, pkey: 'partner-20' });
    expect((await ledger.lookup('partner-20'))!.state).toBe('retracted');
  });

  it("records reports only the archive knows as archived, a tombstone as retracted and purged, and leaves the ones it knows as they are", async () => {
    const { ledgers: [ledger, other], queue } = await make();
    await ledger.accept(partners('alpha', 71, 'pending'));
    await drain(queue);
    await ledger.accept(partners('alpha', 72, 'archived'));
    await ledger.markArchived(['partner-alpha-72']);
    await drain(queue);
    const archived = (r: IngestRecord, retracted = false) => ({ record: r, retracted });
    const adopted = await ledger.adoptArchived(
      [
        archived(partners('alpha', 70, 'only in the archive')),
        archived(partners('alpha', 71, 'another version')),
        archived(partners('alpha', 72, 'another version')),
        archived(partners('beta', 73, 'retracted'), true),
      ],
      'ops:repair',
    );
    expect(adopted.sort()).toEqual(['partner-alpha-70', 'partner-beta-73']);
    // Nothing sent: they are archived.
    expect(await drain(queue)).toEqual([]);
    // Another process finds them: archived, the partner's repeat a repeat, its retraction found.
    expect(await other.lookup('partner-alpha-70')).toMatchObject({ partner: 'alpha', post_id: 70, pending: false, state: 'confirmed' });
    expect(await other.get({ source: 'partner', partner: 'alpha', post_id: 70 })).toMatchObject({ pkey: 'partner-alpha-70', pending: false });
    expect(await other.accept(partners('alpha', 70, 'posted again'))).toEqual({ created: false, pkey: 'partner-alpha-70' });
    expect(await other.isPending('partner-alpha-70')).toBe(false);
    expect(await other.lookup('partner-beta-73')).toMatchObject({ state: 'retracted', retraction: { by: 'ops:repair' } });
    expect(await other.retract('partner-beta-73', 'beta', 'again')).toMatchObject({ found: true, first: false });
    const retractions = async (unpurgedOnly: boolean) => {
      const out: string[] = [];
      for await (const r of other.retractions({ unpurgedOnly })) out.push(r.pkey);
      return out;
    };
    expect(await retractions(false)).toEqual(['partner-beta-73']);
    expect(await retractions(true)).toEqual([]);
    // The ones it knew kept their state and first version.
    expect(await other.lookup('partner-alpha-71')).toMatchObject({ pending: true, record: { report: { title: 'pending' } } });
    expect(await other.isPending('partner-alpha-72')).toBe(false);
    expect(await other.accept(partners('alpha', 72, 'again'))).toEqual({ created: false, pkey: 'partner-alpha-72' });
    // A second repair finds them known.
    expect(await other.adoptArchived([archived(partners('alpha', 70, 'only in the archive'))], 'ops:repair')).toEqual([]);
  });

  it('keeps API keys as digests: added, found by digest from another process, rotated and revoked', async () => {
    const { ledgers: [ledger, other] } = await make();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    await ledger.addKey('alpha', digest(1));
    await ledger.addKey('beta', digest(2));
    expect(await other.keyByDigest(digest(1))).toMatchObject({ name: 'alpha', digest: digest(1) });
    expect(await other.keyByDigest(digest(3))).toBeUndefined();
    expect(await ledger.rotateKey('alpha', digest(3))).toBe(1);
    expect((await other.keyByDigest(digest(1)))!.revoked_at).toEqual(expect.any(String));
    expect((await other.keyByDigest(digest(3)))!.revoked_at).toBeUndefined();
    expect((await other.listKeys()).map((k) => [k.name, k.digest, Boolean(k.revoked_at)])).toEqual([
      ['alpha', digest(1), true],
      ['alpha', digest(3), false],
      ['beta', digest(2), false],
    ]);
    expect(await ledger.revokeKeys('beta')).toBe(1);
    expect(await ledger.revokeKeys('beta')).toBe(0);
    // Listed by name in byte order on every backend, then by age.
    for (const [i, name] of ['a_b', 'a.b', 'a1', 'a-b'].entries()) await ledger.addKey(name, 'abcd'[i]!.repeat(64));
    expect((await other.listKeys()).map((k) => k.name)).toEqual(['a-b', 'a.b', 'a1', 'a_b', 'alpha', 'alpha', 'beta']);
  });

  it("keeps each partner's post_ids apart: the same post_id from two partners is two reports, each one's repeats find its own", async () => {
    const { ledgers: [ledger, other], queue } = await make();
    expect(await ledger.accept(partners('beta', 40, "beta's"))).toEqual({ created: true, pkey: 'partner-beta-40' });
    expect(await other.accept(partners('alpha', 40, "alpha's"))).toEqual({ created: true, pkey: 'partner-alpha-40' });
    expect(await ledger.accept(partners('alpha', 40, 'again'))).toEqual({ created: false, pkey: 'partner-alpha-40' });
    expect(await other.accept(partners('beta', 40, 'again'))).toEqual({ created: false, pkey: 'partner-beta-40' });
    expect((await drain(queue)).map((b) => JSON.parse(b).report.title).sort()).toEqual(["alpha's", "beta's"]);
    expect((await other.get({ source: 'partner', partner: 'alpha', post_id: 40 }))!.record!.report.title).toBe("alpha's");
    expect((await other.get({ source: 'partner', partner: 'beta', post_id: 40 }))!.record!.report.title).toBe("beta's");
    expect(await other.get({ source: 'partner', partner: 'gamma', post_id: 40 })).toBeUndefined();
    expect(await other.get({ source: 'partner', post_id: 40 })).toBeUndefined();
    expect(await other.lookup('partner-40')).toBeUndefined();
    expect((await other.lookup('partner-alpha-40'))!.partner).toBe('alpha');
    await ledger.markArchived(['partner-alpha-40']);
    expect([await other.isPending('partner-alpha-40'), await other.isPending('partner-beta-40')]).toEqual([false, true]);
    // A report of no partner takes the shared form, apart from both.
    expect(await ledger.accept(record(40, 'operators'))).toEqual({ created: true, pkey: 'partner-40' });
    expect(await other.accept(record(40, 'again'))).toEqual({ created: false, pkey: 'partner-40' });
  });

  it("keeps a report accepted before post_ids were per partner its partner's: its retries find it, another partner's same post_id is new", async () => {
    const { ledgers: [ledger, other], queue } = await make();
    expect(await ledger.accept(older('alpha', 50, 'from before'))).toEqual({ created: true, pkey: 'partner-50' });
    expect(await other.accept(partners('alpha', 50, 'retry'))).toEqual({ created: false, pkey: 'partner-50' });
    expect(await other.accept(older('alpha', 50, 'redelivered'))).toEqual({ created: false, pkey: 'partner-50' });
    expect((await other.get({ source: 'partner', partner: 'alpha', post_id: 50 }))!.pkey).toBe('partner-50');
    expect(await other.accept(partners('beta', 50, "beta's"))).toEqual({ created: true, pkey: 'partner-beta-50' });
    expect((await other.get({ source: 'partner', partner: 'beta', post_id: 50 }))!.pkey).toBe('partner-beta-50');
    // Reports of no partner cannot take its key; the older report stays as it was.
    await expect(other.accept(record(50, 'operators'))).rejects.toBeInstanceOf(PkeyTakenError);
    expect(await other.get({ source: 'partner', post_id: 50 })).toBeUndefined();
    expect((await ledger.lookup('partner-50'))!.record!.report.title).toBe('from before');
    // Each message carries its report's first version: the older one found by the key it keeps.
    expect((await drain(queue)).map((b) => JSON.parse(b).report.title).sort()).toEqual(["beta's", 'from before']);
    // Archived by that key, which does not name its partner; beta's same post_id stays pending.
    await other.markArchived(['partner-50']);
    expect([await ledger.isPending('partner-50'), await ledger.isPending('partner-beta-50')]).toEqual([false, true]);
  });

  it("refuses a partner's older report whose key a report of no partner took first; each keeps its own", async () => {
    const { ledgers: [ledger, other] } = await make();
    expect(await ledger.accept(record(60, 'operators'))).toEqual({ created: true, pkey: 'partner-60' });
    // Another report, not a repeat: its key is taken.
    await expect(other.accept(older('alpha', 60, 'from before'))).rejects.toBeInstanceOf(PkeyTakenError);
    expect((await ledger.lookup('partner-60'))!.record!.report.title).toBe('operators');
    expect(await other.get({ source: 'partner', partner: 'alpha', post_id: 60 })).toBeUndefined();
    // The report of no partner's own retry is still a repeat.
    expect(await other.accept(record(60, 'again'))).toEqual({ created: false, pkey: 'partner-60' });
  });

  it('gives a new key only a name no key has had; a rotation keeps the name', async () => {
    const { ledgers: [ledger, other] } = await make();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    await ledger.addKey('delta', digest(4));
    await expect(other.addKey('delta', digest(5))).rejects.toBeInstanceOf(KeyNameInUseError);
    await ledger.revokeKeys('delta');
    // Revoked, the name still holds its reports: still refused.
    await expect(other.addKey('delta', digest(6))).rejects.toBeInstanceOf(KeyNameInUseError);
    expect(await other.rotateKey('delta', digest(7))).toBe(0);
    expect((await ledger.listKeys()).map((k) => [k.digest, Boolean(k.revoked_at)]).sort()).toEqual([
      [digest(4), true],
      [digest(7), false],
    ]);
  });

  it('refuses a new key the name of a partner that has reports (its key since dropped from API_KEYS): only a rotation takes it', async () => {
    const { ledgers: [ledger, other] } = await make();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    // Accepted, not archived yet: pending reports are the partner's as much as archived ones.
    await ledger.accept(partners('zeta', 70, 'posted with a key in API_KEYS'));
    expect(await other.hasReports('zeta')).toBe(true);
    // A name is itself, not a prefix of another's.
    expect([await other.hasReports('zet'), await other.hasReports('zeta2')]).toEqual([false, false]);
    const refused = await other.addKey('zeta', digest(1)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(KeyNameInUseError);
    expect((refused as KeyNameInUseError).message).toMatch(/zeta has reports/);
    expect(await ledger.listKeys()).toEqual([]);
    await ledger.markArchived(['partner-zeta-70']);
    await expect(ledger.addKey('zeta', digest(2))).rejects.toBeInstanceOf(KeyNameInUseError);
    expect(await other.rotateKey('zeta', digest(3))).toBe(0);
    expect((await ledger.listKeys()).map((k) => k.name)).toEqual(['zeta']);
    await other.addKey('zeta2', digest(4));
  });

  if (enforcesConditions) {
    it('two processes adding a key under one new name at once: exactly one is kept', async () => {
      const { ledgers } = await make();
      const digest = (n: number) => String(n).repeat(64).slice(0, 64);
      const results = await Promise.allSettled([1, 2, 3, 4].map((n) => ledgers[n % 2]!.addKey('epsilon', digest(n))));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason)).toEqual([expect.any(KeyNameInUseError), expect.any(KeyNameInUseError), expect.any(KeyNameInUseError)]);
      expect(await ledgers[0].listKeys()).toHaveLength(1);
    });

    it('rotations of one name at once: the name keeps exactly one working key, made by a rotation that succeeded', async () => {
      const { ledgers } = await make();
      await ledgers[0]!.addKey('eta', '9'.repeat(64));
      for (const round of [1, 2, 3, 4, 5]) {
        const digests = [1, 2, 3, 4].map((i) => `${round}${i}`.repeat(32));
        const results = await Promise.allSettled(digests.map((d, i) => ledgers[i % 2]!.rotateKey('eta', d)));
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(KeyRotationConflictError);
        const live = (await ledgers[1]!.listKeys()).filter((k) => k.name === 'eta' && !k.revoked_at);
        expect(live).toHaveLength(1);
        expect(digests.filter((_, i) => results[i]!.status === 'fulfilled')).toContain(live[0]!.digest);
      }
    });

    it('one report posted twice in the same millisecond (the same bytes): one is created and queued, the other is a repeat', async () => {
      const { ledgers: [ledger, other], queue } = await make();
      // A sender that posts in parallel, or a proxy that doubles a request: the records are equal
      // to the byte. (The S3 adapter's own retried PUT is its own to recognise: objectStore.contract.)
      const twin = record(47, 'twice');
      const results = await Promise.all([ledger.accept(twin), other.accept(twin), ledger.accept(twin), other.accept(twin)]);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(results.every((r) => r.pkey === 'partner-47')).toBe(true);
      expect((await drain(queue)).map((b) => JSON.parse(b).pkey)).toEqual(['partner-47']);
    });

    it('two processes racing the first post of a post_id: exactly one is created, and its version kept', async () => {
      const { ledgers, queue } = await make();
      for (const id of [10, 11, 12, 13, 14]) {
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => ledgers[i % 2]!.accept(record(id, `try-${i}`))));
        const created = results.map((r, i) => (r.created ? i : -1)).filter((i) => i >= 0);
        expect(created).toHaveLength(1);
        expect((await ledgers[0].get({ source: 'partner', post_id: id }))!.record!.report.title).toBe(`try-${created[0]}`);
      }
      expect((await drain(queue)).map((b) => JSON.parse(b).pkey).sort()).toEqual([10, 11, 12, 13, 14].map((id) => `partner-${id}`));
    });
  }
});

describe.skipIf(!HAS_MOTO)('moto as the S3 the race tests rely on', () => {
  it('refuses a second PUT with If-None-Match: * (412), as S3 does', async () => {
    const bucket = `inm-${randomBytes(4).toString('hex')}`;
    await moto!.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const put = (body: string) => moto!.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: body, IfNoneMatch: '*' }));
    await put('first');
    await expect(put('second')).rejects.toMatchObject({ $metadata: { httpStatusCode: 412 } });
  });
});

/** An S3 client of fauxqs that notes every request it sends: its command, when it left and when it came back. */
function countedS3(): { s3: S3Client; calls: { command: string; sent: number; back: number }[] } {
  const calls: { command: string; sent: number; back: number }[] = [];
  const s3 = new S3Client({ endpoint: fauxqs.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, forcePathStyle: true });
  s3.middlewareStack.add(
    (next, context) => async (args) => {
      const call = { command: String(context.commandName), sent: performance.now(), back: Infinity };
      calls.push(call);
      try {
        return await next(args);
      } finally {
        call.back = performance.now();
      }
    },
    { step: 'initialize' },
  );
  return { s3, calls };
}

describe("the object ledger's requests to S3", () => {
  it("a new report's acceptance reads once, all at once, then writes its marker and key without a look before either; a repeat writes nothing", async () => {
    const { config, bucket } = await freshBucket(fauxqs, 'requests');
    const { s3, calls } = countedS3();
    const ledger = new ObjectLedger(new S3ObjectStore(s3, { bucket, prefix: 'flood/' }), new SqsQueue(fauxqs.sqs, config.queueUrl));

    expect(await ledger.accept(partners('alpha', 31, 'first'))).toEqual({ created: true, pkey: 'partner-alpha-31' });
    const reads = calls.filter((c) => c.command !== 'PutObjectCommand');
    const writes = calls.filter((c) => c.command === 'PutObjectCommand');
    // Its own key and marker, and (a report posted before post_ids were per partner) the shared key and marker.
    expect(reads.map((c) => c.command).sort()).toEqual(['GetObjectCommand', 'GetObjectCommand', 'HeadObjectCommand', 'HeadObjectCommand']);
    expect(Math.max(...reads.map((c) => c.sent))).toBeLessThan(Math.min(...reads.map((c) => c.back)));
    expect(writes).toHaveLength(2);
    expect(writes[0]!.sent).toBeGreaterThanOrEqual(Math.max(...reads.map((c) => c.back)));
    expect(writes[1]!.sent).toBeGreaterThanOrEqual(writes[0]!.back);

    calls.length = 0;
    expect(await ledger.accept(partners('alpha', 31, 'second'))).toEqual({ created: false, pkey: 'partner-alpha-31' });
    expect(calls.filter((c) => c.command === 'PutObjectCommand')).toEqual([]);
    expect((await ledger.get({ source: 'partner', partner: 'alpha', post_id: 31 }))!.record!.report.title).toBe('first');

    // An import's batch looks for its reports' objects by listing their folders, not a read a
    // report: 300 new reports, then (archived) the same again, all repeats.
    const batch = Array.from({ length: 300 }, (_, i) => partners('alpha', 5_000 + i, `imported ${i}`));
    for (const again of [false, true]) {
      calls.length = 0;
      const outcomes = await acceptHeld(ledger, batch, Date.now() + 60_000);
      expect(outcomes.every((o) => o.created === !again)).toBe(true);
      if (!again) await ledger.markArchived(batch.map((r) => r.pkey));
      const looks = calls.filter((c) => !['PutObjectCommand', 'DeleteObjectsCommand'].includes(c.command)).map((c) => c.command);
      expect(looks.filter((c) => c !== 'ListObjectsV2Command')).toEqual([]);
      expect(looks.length).toBeLessThanOrEqual(4);
      expect(calls.filter((c) => c.command === 'PutObjectCommand')).toHaveLength(again ? 0 : 600);
    }
  });

  it('reconciliation reads the records of the stale markers it lists many at a time, not one after another', async () => {
    const { config, bucket } = await freshBucket(fauxqs, 'stale');
    const { s3, calls } = countedS3();
    const ledger = new ObjectLedger(new S3ObjectStore(s3, { bucket, prefix: 'flood/' }), new SqsQueue(fauxqs.sqs, config.queueUrl));
    // Forty reports an import held, its hold run out: each stale marker is read (two GETs) before it is sent again.
    await acceptHeld(ledger, Array.from({ length: 40 }, (_, i) => partners('alpha', 700 + i, `held ${i}`)), Date.now() + 200);
    await new Promise((r) => setTimeout(r, 400));
    calls.length = 0;
    expect(await ledger.requeueStale(Date.now() + 1_000)).toBe(40);
    const gets = calls.filter((c) => c.command === 'GetObjectCommand');
    expect(gets).toHaveLength(80);
    // Read one marker at a time, at most its two GETs would be in flight together.
    const inFlight = Math.max(...gets.map((g) => gets.filter((o) => o.sent <= g.sent && o.back > g.sent).length));
    expect(inFlight).toBeGreaterThan(8);
  });

  it("an import's batch finds a partner's earlier reports past a folder its listing could not read to the end", async () => {
    const { config, bucket } = await freshBucket(fauxqs, 'crowded');
    const ledger = new ObjectLedger(new S3ObjectStore(fauxqs.s3, { bucket, prefix: 'flood/' }), new SqsQueue(fauxqs.sqs, config.queueUrl));
    // Alpha's post_id 2 from before post_ids were per partner (in the shared folder), its 3
    // posted live; 1,110 operators' reports named between "1.json" and "2.json" there (10–19,
    // 100–199, 1000–1999), more than a listing reads for a batch of four.
    expect(await ledger.accept(older('alpha', 2, 'from before'))).toMatchObject({ created: true, pkey: 'partner-2' });
    expect(await ledger.accept(partners('alpha', 3, 'live'))).toMatchObject({ created: true });
    const crowd = [10, 100, 1_000].flatMap((from) => Array.from({ length: from }, (_, i) => record(from + i, 'operators')));
    expect((await acceptHeld(ledger, crowd, Date.now() + 60_000)).every((o) => o.created)).toBe(true);

    const outcomes = await acceptHeld(ledger, [1, 2, 3, 4].map((id) => partners('alpha', id, 'imported')), Date.now() + 60_000);
    expect(outcomes.map((o) => [o.created, o.pkey])).toEqual([
      [true, 'partner-alpha-1'],
      [false, 'partner-2'],
      [false, 'partner-alpha-3'],
      [true, 'partner-alpha-4'],
    ]);
    expect((await ledger.get({ source: 'partner', partner: 'alpha', post_id: 2 }))!.record!.report.title).toBe('from before');
    expect((await ledger.get({ source: 'partner', partner: 'alpha', post_id: 3 }))!.record!.report.title).toBe('live');
  });
});

describe.skipIf(!HAS_MOTO)('the object ledger on moto, which honours If-Match and If-None-Match on a PUT as S3 does', () => {
  /** A bucket and a queue of the test's own. */
  /**
   * The store, its creates under `prefix` answered "taken" (412 or 409): after writing the
   * object (`written`: the SDK's retry meeting its own first attempt), or without.
   */
  function createsAnswered(store: S3ObjectStore, prefix: string, written: boolean): S3ObjectStore {
    return new Proxy(store, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== 'putIfAbsent') return typeof value === 'function' ? value.bind(target) : value;
        return async (key: string, body: Buffer | string, options?: { seenAbsent?: boolean }) => {
          if (!key.startsWith(prefix)) return target.putIfAbsent(key, body, options);
          if (written) await target.putIfAbsent(key, body, options);
          return false;
        };
      },
    });
  }

  /** The store with one method replaced, the rest as it is. */
  function replacing<K extends keyof S3ObjectStore>(store: S3ObjectStore, name: K, method: (target: S3ObjectStore) => S3ObjectStore[K]): S3ObjectStore {
    return new Proxy(store, {
      get(target, prop) {
        if (prop === name) return method(target);
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  async function onMoto(): Promise<{ store: S3ObjectStore; sqs: SqsQueue }> {
    const config = await testConfig('aws', moto!, { QUEUE_URL: moto!.queueUrl(`reports-${randomBytes(4).toString('hex')}`) });
    await bootstrap(config, { s3: moto!.s3, sqs: moto!.sqs });
    const bucket = `ledger-${randomBytes(4).toString('hex')}`;
    await moto!.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    return { store: new S3ObjectStore(moto!.s3, { bucket, prefix: 'flood/' }), sqs: new SqsQueue(moto!.sqs, config.queueUrl) };
  }

  it('a report archived while reconciliation sends it again stays archived: its marker does not come back', async () => {
    const { store, sqs } = await onMoto();
    const worker = new ObjectLedger(store, sqs);
    // Once armed, a worker that receives each message sent again at once and archives its
    // report, before reconciliation has rewritten the report's marker.
    let armed = false;
    const queue = new Proxy(sqs, {
      get(target, prop) {
        if (prop !== 'send') {
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (bodies: string[]) => {
          await target.send(bodies);
          if (armed) await worker.markArchived(bodies.map((b) => (JSON.parse(b) as IngestRecord).pkey));
        };
      },
    });
    const reconciling = new ObjectLedger(store, queue);
    await reconciling.accept(record(41, 'first'));
    await reconciling.accept(record(42, 'first'));
    await drain(sqs);
    armed = true;
    expect(await reconciling.requeueStale(Date.now() + 1_000)).toBe(2);
    expect(await worker.isPending('partner-41')).toBe(false);
    expect(await worker.isPending('partner-42')).toBe(false);
    // Nothing left for a later run to send a third time.
    await drain(sqs);
    expect(await reconciling.requeueStale(Date.now() + 1_000)).toBe(0);
  });

  it('a rotation overtaken by a later one between its claim and its key: the later key is kept, the earlier one revoked and its rotation told', async () => {
    const { store, sqs } = await onMoto();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    const ledger = new ObjectLedger(store, sqs);
    await ledger.addKey('theta', digest(1));
    // The first rotation's key is written only once the second rotation has finished.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const slow = replacing(store, 'putIfAbsent', (target) => async (key, body, options) => {
      if (key.startsWith(API_KEYS_PREFIX)) await released;
      return target.putIfAbsent(key, body, options);
    });
    const first = new ObjectLedger(slow, sqs).rotateKey('theta', digest(2)).catch((err: unknown) => err);
    await vi.waitFor(async () => expect((await store.get(`${API_KEY_NAMES_PREFIX}theta.json`))!.body.toString()).toContain(digest(2)));
    // The later rotation finds the added key, not the first rotation's, which is not written yet.
    expect(await ledger.rotateKey('theta', digest(3))).toBe(1);
    release();
    expect(await first).toBeInstanceOf(KeyRotationConflictError);
    expect((await ledger.listKeys()).map((k) => [k.digest, Boolean(k.revoked_at)]).sort()).toEqual([
      [digest(1), true],
      [digest(2), true],
      [digest(3), false],
    ]);
  });

  it('a rotation overtaken by a later one before it revokes: it leaves the later key working', async () => {
    const { store, sqs } = await onMoto();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    const ledger = new ObjectLedger(store, sqs);
    await ledger.addKey('iota', digest(1));
    // The first rotation lists the name's keys a second time (to revoke the earlier ones) only once the second has finished.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let listings = 0;
    let listing = false;
    const slow = replacing(store, 'list', (target) =>
      async function* (options: ListOptions) {
        if (options.prefix === API_KEYS_PREFIX && ++listings === 2) {
          listing = true;
          await released;
        }
        yield* target.list(options);
      },
    );
    const first = new ObjectLedger(slow, sqs).rotateKey('iota', digest(2));
    await vi.waitFor(() => expect(listing).toBe(true));
    expect(await ledger.rotateKey('iota', digest(3))).toBe(2);
    release();
    expect(await first).toBe(0);
    expect((await ledger.listKeys()).map((k) => [k.digest, Boolean(k.revoked_at)]).sort()).toEqual([
      [digest(1), true],
      [digest(2), true],
      [digest(3), false],
    ]);
  });

  it("a rotation after the name's claim was lost (deleted by hand, a restore) still revokes every earlier key", async () => {
    const { store, sqs } = await onMoto();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    const ledger = new ObjectLedger(store, sqs);
    await ledger.addKey('kappa', digest(1));
    await ledger.rotateKey('kappa', digest(2));
    await ledger.rotateKey('kappa', digest(3));
    await store.delete([`${API_KEY_NAMES_PREFIX}kappa.json`]);
    expect(await ledger.rotateKey('kappa', digest(4))).toBe(1);
    expect((await ledger.listKeys()).filter((k) => !k.revoked_at).map((k) => k.digest)).toEqual([digest(4)]);
  });

  it('a key add that stopped between claiming its name and writing its key holds the name only while an add could still be under way', async () => {
    const { store, sqs } = await onMoto();
    const digest = (n: number) => String(n).repeat(64).slice(0, 64);
    // Stopped after its claim: the key's write never happens.
    const stopping = new Proxy(store, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== 'putIfAbsent') return typeof value === 'function' ? value.bind(target) : value;
        return async (key: string, body: Buffer | string) => {
          if (key.startsWith(API_KEYS_PREFIX)) throw new Error('stopped');
          return target.putIfAbsent(key, body);
        };
      },
    });
    await expect(new ObjectLedger(stopping, sqs).addKey('omega', digest(1))).rejects.toThrow('stopped');
    const ledger = new ObjectLedger(store, sqs);
    expect(await ledger.listKeys()).toEqual([]);
    // At once, the claim may be an add's under way: refused.
    await expect(ledger.addKey('omega', digest(2))).rejects.toBeInstanceOf(KeyNameInUseError);
    // Long after (beyond any clock difference with the store, and any add's time), the claim with
    // no key is taken over; the name then has its key, and is refused as any other.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 31 * 60_000 });
    try {
      await ledger.addKey('omega', digest(3));
      expect((await ledger.listKeys()).map((k) => [k.name, k.digest])).toEqual([['omega', digest(3)]]);
      await expect(ledger.addKey('omega', digest(4))).rejects.toBeInstanceOf(KeyNameInUseError);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a post whose key write was retried after a timeout (its retry finds the key: 412) is still created and queued', async () => {
    const { store, sqs } = await onMoto();
    // The SDK's retry of our own PUT of the key answers as if another had written it.
    const retried = createsAnswered(store, IDEMPOTENCY_PREFIX, true);
    const ledger = new ObjectLedger(retried, sqs);
    expect(await ledger.accept(record(44, 'first'))).toEqual({ created: true, pkey: 'partner-44' });
    expect((await drain(sqs)).map((b) => JSON.parse(b).pkey)).toEqual(['partner-44']);
    expect(await ledger.isPending('partner-44')).toBe(true);
  });

  it('a post whose key cannot be read back after its create was refused is refused as unavailable, its marker kept for reconciliation', async () => {
    const { store, sqs } = await onMoto();
    // The key's create answered "taken" while no key is there to read (a 409 meeting a write
    // that did not stand): the report must not be dropped as another's.
    const refused = createsAnswered(store, IDEMPOTENCY_PREFIX, false);
    await expect(new ObjectLedger(refused, sqs).accept(record(46, 'first'))).rejects.toBeInstanceOf(UnavailableError);
    const reconciling = new ObjectLedger(store, sqs);
    expect(await reconciling.isPending('partner-46')).toBe(true);
    expect(await reconciling.requeueStale(Date.now() + 1_000)).toBe(1);
    expect((await drain(sqs)).map((b) => JSON.parse(b).pkey)).toEqual(['partner-46']);
  });

  it('a post whose reads came before another copy was accepted and archived leaves no marker: the report is not stored again', async () => {
    const { store, sqs } = await onMoto();
    const first = new ObjectLedger(store, sqs);
    // A slow API task: its reads found nothing, as they would have before the first copy came.
    const late = new ObjectLedger(
      new Proxy(store, {
        get(target, prop) {
          if (prop === 'head') return async () => undefined;
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }),
      sqs,
    );
    expect(await first.accept(record(43, 'first'))).toEqual({ created: true, pkey: 'partner-43' });
    await drain(sqs);
    await first.markArchived(['partner-43']);

    expect(await late.accept(record(43, 'second'))).toEqual({ created: false, pkey: 'partner-43' });
    expect(await first.isPending('partner-43')).toBe(false);
    expect(await first.requeueStale(Date.now() + 1_000)).toBe(0);
    expect(await drain(sqs)).toEqual([]);
    expect((await first.get({ source: 'partner', post_id: 43 }))!.record!.report.title).toBe('first');
  });
});

describe('the object ledger listing what was accepted (verify on S3)', () => {
  it('counts a report accepted between its two listings as nothing, never as archived', async () => {
    const { config, bucket } = await freshBucket(fauxqs, 'listing');
    const queue = new SqsQueue(fauxqs.sqs, config.queueUrl);
    const store = new S3ObjectStore(fauxqs.s3, { bucket, prefix: 'flood/' });
    const other = new ObjectLedger(store, queue, 0);
    await other.accept(record(1, 'before'));
    // An API accepts a report while verify lists: between its first listing and its second.
    let lists = 0;
    const listing = Object.assign(Object.create(store) as S3ObjectStore, {
      list: (options: Parameters<S3ObjectStore['list']>[0]) => {
        lists += 1;
        if (lists !== 2) return store.list(options);
        return (async function* () {
          await other.accept(record(2, 'meanwhile'));
          yield* store.list(options);
        })();
      },
    });
    const found = [];
    for await (const page of new ObjectLedger(listing, queue, 0).accepted(Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22))) found.push(...page);
    expect(lists).toBe(2);
    // Each listed report is pending (neither is archived); the one accepted meanwhile is left to the next verify.
    expect(found.every((r) => r.pending)).toBe(true);
    expect(found.map((r) => r.pkey)).toContain('partner-1');
    await drain(queue);
  });
});
