// SNS messages of archived and retracted reports (the relay in snsRelay.ts sends them from the
// event log, apart from the flushes). One message per city and barangay, so subscribers filter
// on the message attributes `city` and `local_area` (each "none" outside every city or barangay)
// and `type`, and receive only their reports. The body is the CloudEvent the webhooks send; its
// id is derived from the kind and the reports it carries, so a repeat has the same id.
import { createHash } from 'node:crypto';
import { PublishBatchCommand, type PublishBatchRequestEntry, type SNSClient } from '@aws-sdk/client-sns';
import { mapWeighted } from '../ops/concurrency.js';
import { batchesBy } from '../shared/batches.js';
import { UnavailableError } from '../shared/errors.js';
import { CLOUDEVENT_TYPE, type EventKind } from './events.js';
import type { ReportFeature } from './feature.js';
import { cloudEventBody } from './webhook.js';

/** Features per message (cut further when their JSON would pass SNS's 256 KiB). */
const PER_MESSAGE = 50;
/** SNS's limits of a PublishBatch: its entries, and their messages and attributes together. */
const PER_BATCH = 10;
const MAX_BATCH_BYTES = 256 * 1024;
const MAX_MESSAGE_BYTES = 256 * 1024;
/** PublishBatch calls in flight at once: the fifty calls of 500 reports in as many barangays go in five rounds. */
const CALLS_AT_ONCE = 10;

/**
 * Publishes a batch of one kind's features, CALLS_AT_ONCE calls at a time; throws what SNS
 * refused (once the calls under way have ended; none starts after a failure).
 */
export async function publish(sns: SNSClient, topicArn: string, kind: EventKind, features: readonly ReportFeature[], timeMs: number): Promise<void> {
  await mapWeighted(batchesOf(messagesOf(features, kind, timeMs)), { limit: CALLS_AT_ONCE, budget: CALLS_AT_ONCE, weight: () => 1 }, async (batch) => {
    let failed: string[];
    try {
      const out = await sns.send(new PublishBatchCommand({ TopicArn: topicArn, PublishBatchRequestEntries: batch }));
      failed = (out.Failed ?? []).map((f) => `${f.Id}: ${f.Code} ${f.Message ?? ''}`);
    } catch (err) {
      throw new UnavailableError('queue', `SNS publish failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (failed.length > 0) throw new UnavailableError('queue', `SNS refused ${failed.length} messages: ${failed.slice(0, 3).join('; ')}`);
  });
}

/** How long publishing these features may take when each call takes at most `callMs` (its retries included): its rounds of calls. */
export function publishBoundMs(features: readonly ReportFeature[], kind: EventKind, callMs: number): number {
  return Math.ceil(batchesOf(messagesOf(features, kind)).length / CALLS_AT_ONCE) * callMs;
}

/** The messages of one batch: grouped by city and barangay, then cut to size. */
export function messagesOf(features: readonly ReportFeature[], kind: EventKind = 'archived', timeMs = Date.now()): PublishBatchRequestEntry[] {
  const groups = new Map<string, ReportFeature[]>();
  for (const f of features) {
    const key = `${f.properties.tags.instance_region_code ?? 'none'} ${f.properties.tags.local_area_id ?? 'none'}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(f);
  }
  const entries: PublishBatchRequestEntry[] = [];
  for (const [key, list] of groups) {
    const [city, localArea] = key.split(' ') as [string, string];
    for (let i = 0; i < list.length; i += PER_MESSAGE) {
      for (const chunk of fitting(list.slice(i, i + PER_MESSAGE))) {
        const pkeys = chunk.map((f) => f.properties.pkey).sort();
        const id = createHash('sha256').update(`${kind}\n${pkeys.join('\n')}`).digest('hex').slice(0, 32);
        entries.push({
          Id: `m${entries.length}`,
          Message: cloudEventBody({ id, type: CLOUDEVENT_TYPE[kind], timeMs }, JSON.stringify(chunk)),
          MessageAttributes: {
            type: { DataType: 'String', StringValue: CLOUDEVENT_TYPE[kind] },
            city: { DataType: 'String', StringValue: city },
            local_area: { DataType: 'String', StringValue: localArea },
            reports: { DataType: 'Number', StringValue: String(chunk.length) },
          },
        });
      }
    }
  }
  return entries;
}

/**
 * The entries in PublishBatch calls, in order: at most PER_BATCH a call and MAX_BATCH_BYTES of
 * messages and attributes together (ten messages of a busy barangay's 50 reports pass it, and SNS
 * refuses the whole call).
 */
export function batchesOf(entries: readonly PublishBatchRequestEntry[]): PublishBatchRequestEntry[][] {
  return batchesBy(entries, PER_BATCH, MAX_BATCH_BYTES, entryBytes);
}

/** An entry's bytes as SNS counts them: the message, and each attribute's name, type and value. */
function entryBytes(entry: PublishBatchRequestEntry): number {
  let n = Buffer.byteLength(entry.Message ?? '');
  for (const [name, value] of Object.entries(entry.MessageAttributes ?? {})) n += Buffer.byteLength(name) + Buffer.byteLength(value.DataType ?? '') + Buffer.byteLength(value.StringValue ?? '');
  return n;
}

/** Halves a chunk until each part's JSON fits a message (long texts and titles). */
function fitting(chunk: ReportFeature[]): ReportFeature[][] {
  if (chunk.length <= 1 || Buffer.byteLength(JSON.stringify(chunk)) < MAX_MESSAGE_BYTES - 4096) return [chunk];
  const half = Math.ceil(chunk.length / 2);
  return [...fitting(chunk.slice(0, half)), ...fitting(chunk.slice(half))];
}
