// The event log on the file store with a webhook subscription, as the AWS backend keeps them in
// the bucket: for tests of its consumers (webhooks, SNS) without a worker.
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { ObjectEventLog } from '../../src/events/objectEventLog.js';
import { ObjectWebhooks, type StoredSubscription } from '../../src/events/objectWebhooks.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from './env.js';

/** Report `n`'s row as the worker gives it to the event log: in Quezon City, created and received at `atMs`. */
export function archivedRow(n: number, atMs: number): ArchiveRow {
  return {
    pkey: `partner-a-${n}`, created_at_ms: atMs, source: 'partner', status: 'confirmed', url: null, image_url: null, disaster_type: 'flood', report_data: null,
    instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65, post_id: n, partner_city: 'Quezon City', received_at_ms: atMs, boundary_version: 'v1',
  } as ArchiveRow;
}

/** A new event log and its webhooks on a file store of their own; `clock`: the log's time. */
export async function eventLogOnFiles(clock: () => number = Date.now): Promise<{ log: ObjectEventLog; hooks: ObjectWebhooks; store: FileObjectStore; subscribe(id: string): Promise<StoredSubscription> }> {
  const store = new FileObjectStore(await tempDir('flood-hooks-'));
  const log = new ObjectEventLog(store, clock);
  const hooks = new ObjectWebhooks(store, log);
  const subscribe = (id: string) => hooks.add({ id, url: 'https://hooks.example.org/flood', secret: 's'.repeat(32), admins: [], localAreas: [], events: ['archived'], createdAt: new Date(clock()).toISOString() });
  return { log, hooks, store, subscribe };
}
