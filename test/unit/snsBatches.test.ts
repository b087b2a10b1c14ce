// SNS messages of archived reports in PublishBatch calls: SNS refuses a whole call past ten
// entries or past 256 KiB of messages and attributes together, and a relay that sent such a
// call would retry it for ever, holding every later announcement behind it. The calls of a
// batch go ten at a time, and the relay's lease on a batch lasts as long as its rounds may: a
// lease that ran out mid-batch would have another worker publish the batch beside it.
import type { SNSClient } from '@aws-sdk/client-sns';
import fs from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableCursor } from '../../src/events/cursor.js';
import { EventLog } from '../../src/events/eventLog.js';
import { batchesOf, messagesOf, publish, publishBoundMs } from '../../src/events/snsPublisher.js';
import { snsRelay } from '../../src/events/snsRelay.js';
import type { ReportFeature } from '../../src/events/feature.js';
import { createLogger } from '../../src/shared/log.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

/** `n` reports in each of `areas` barangays, each with a text of `textBytes`. */
function features(areas: number, n: number, textBytes: number): ReportFeature[] {
  const out: ReportFeature[] = [];
  for (let a = 0; a < areas; a++) {
    for (let i = 0; i < n; i++) {
      out.push({
        type: 'Feature',
        geometry: { type: 'Point', coordinates: [121.05, 14.65] },
        properties: { pkey: `partner-${a}-${i}`, created_at: '2026-11-21T05:00:00Z', text: 'x'.repeat(textBytes), tags: { instance_region_code: 'PH-QC', local_area_id: `13813000${String(a).padStart(2, '0')}` } },
      } as unknown as ReportFeature);
    }
  }
  return out;
}

const bytesOf = (batch: ReturnType<typeof messagesOf>) =>
  batch.reduce((n, e) => n + Buffer.byteLength(e.Message!) + Object.entries(e.MessageAttributes!).reduce((m, [k, v]) => m + k.length + v.DataType!.length + (v.StringValue ?? '').length, 0), 0);

describe('SNS batches', () => {
  it('keeps each call within 256 KiB: ten busy barangays of 50 reports go in several calls, every message once, in order', () => {
    // About 700 bytes a report: some 35 KB a message, ten of them well past 256 KiB.
    const entries = messagesOf(features(10, 50, 600));
    expect(entries).toHaveLength(10);
    expect(bytesOf(entries)).toBeGreaterThan(256 * 1024);
    const batches = batchesOf(entries);
    expect(batches.length).toBeGreaterThan(1);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(10);
      expect(bytesOf(batch)).toBeLessThanOrEqual(256 * 1024);
    }
    expect(batches.flat().map((e) => e.Id)).toEqual(entries.map((e) => e.Id));
  });

  it('puts at most ten small messages in a call', () => {
    const entries = messagesOf(features(25, 1, 20));
    expect(batchesOf(entries).map((b) => b.length)).toEqual([10, 10, 5]);
  });
});

/** An SNS client whose calls wait until the test lets them end, all those under way at once. */
function heldSns() {
  const waiting: (() => void)[] = [];
  const sent: number[] = [];
  let open = false;
  const client = {
    send: (command: { input: { PublishBatchRequestEntries: unknown[] } }) =>
      new Promise((resolve) => {
        sent.push(command.input.PublishBatchRequestEntries.length);
        const end = () => resolve({ Successful: [], Failed: [] });
        if (open) end();
        else waiting.push(end);
      }),
  } as unknown as SNSClient;
  /** Every call under way and to come ends at once. */
  const release = () => {
    open = true;
    for (const end of waiting.splice(0)) end();
  };
  /** Waits until no new call starts, then ends those under way; how many they were. */
  const endRound = async (): Promise<number> => {
    let seen = -1;
    while (seen !== waiting.length) {
      seen = waiting.length;
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    }
    const round = waiting.splice(0);
    for (const end of round) end();
    return round.length;
  };
  return { client, sent, waiting, endRound, release };
}

describe('SNS publishing', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('sends the calls of 500 reports in as many barangays ten at a time, in the rounds its bound counts', async () => {
    const sns = heldSns();
    const reports = features(500, 1, 20);
    let done = false;
    const publishing = publish(sns.client, 'arn:aws:sns:ap-southeast-1:000000000000:reports', 'archived', reports, Date.now()).then(() => (done = true));
    const rounds: number[] = [];
    while (!done) {
      const n = await sns.endRound();
      if (n > 0) rounds.push(n);
    }
    await publishing;
    expect(rounds).toEqual([10, 10, 10, 10, 10]);
    expect(sns.sent.reduce((a, b) => a + b, 0)).toBe(500);
    expect(publishBoundMs(reports, 'archived', 1_000)).toBe(rounds.length * 1_000);
  });

  it("holds the relay's lease on a batch for as long as its rounds of calls may take", async () => {
    const dir = await tempDir();
    const feed = new EventLog(dir);
    const store = new FileObjectStore(`${dir}/store`);
    const sns = heldSns();
    const callMs = 60_000;
    feed.record('archived', features(500, 1, 20));
    const relay = snsRelay(feed, store, sns.client, { topicArn: 'arn:aws:sns:ap-southeast-1:000000000000:reports', retryBaseMs: 1_000, retryMaxMs: 300_000, callMs }, createLogger('silent'));
    cleanup.push(async () => {
      sns.release();
      await relay.stop();
      feed.close();
      await fs.rm(dir, { recursive: true, force: true });
    });
    const started = Date.now();
    relay.start();
    // The batch is claimed before its first call.
    while (sns.waiting.length === 0) await new Promise((r) => setTimeout(r, 5));
    const { state } = await new DurableCursor(store, 'sns', async () => ({ upto: 0 })).current();
    expect(state.lease!.untilMs - started).toBeGreaterThanOrEqual(5 * callMs);
    // Published once, whole, and the cursor past it.
    sns.release();
    while ((await new DurableCursor(store, 'sns', async () => ({ upto: 0 })).current()).state.upto < 500) await new Promise((r) => setTimeout(r, 5));
    await relay.stop();
    const after = await new DurableCursor(store, 'sns', async () => ({ upto: 0 })).current();
    expect(after.state).toEqual({ upto: 500 });
    expect(sns.sent.reduce((a, b) => a + b, 0)).toBe(500);
  });
});
