// The archive's import lock while an import runs: touched over the version it read, kept through a
// touch whose write the store refused though it had landed (a retry of its own), and, once
// another import holds it, an import that goes on writing is stopped at its next step.
import { describe, expect, it } from 'vitest';
import { ImportLockLostError, withImportLock } from '../../src/ops/importLock.js';
import { IMPORT_LOCK_KEY } from '../../src/store/layout.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { eventually, tempDir } from '../support/env.js';

const quiet = { warn: () => undefined };
const holderOf = async (store: FileObjectStore) => JSON.parse((await store.get(IMPORT_LOCK_KEY))!.body.toString('utf8')) as { id: string; touched: string };

describe('the archive\'s import lock while held', () => {
  it('is touched, and kept through a touch the store refused after writing it', async () => {
    const store = new FileObjectStore(await tempDir());
    let refuseOnce = true;
    // The write lands, and its answer is lost: the SDK's retry is refused (412).
    const flaky = Object.assign(Object.create(store) as FileObjectStore, {
      putIfMatch: async (key: string, body: string, etag: string) => {
        const wrote = await store.putIfMatch(key, body, etag);
        if (wrote && refuseOnce) {
          refuseOnce = false;
          return false;
        }
        return wrote;
      },
    });
    await withImportLock({ store: flaky, dataDir: await tempDir(), log: quiet, touchMs: 30 }, async (stillHeld) => {
      const first = await holderOf(store);
      // The refused touch, then one more that lands.
      await eventually(async () => (!refuseOnce ? true : undefined), 15_000, 'a refused touch');
      const later = await eventually(async () => {
        const now = await holderOf(store);
        return now.touched !== first.touched ? now : undefined;
      }, 15_000, 'a touch after it');
      expect(later.id).toBe(first.id);
      expect(Date.parse(later.touched)).toBeGreaterThan(Date.parse(first.touched));
      expect(() => stillHeld()).not.toThrow();
    });
    expect(await store.get(IMPORT_LOCK_KEY)).toBeUndefined();
  });

  it('once another import took it over, stops the next step, and is left to its new holder', async () => {
    const store = new FileObjectStore(await tempDir());
    const other = JSON.stringify({ host: 'elsewhere', pid: 1, id: 'other', since: new Date().toISOString(), touched: new Date().toISOString() });
    const run = withImportLock({ store, dataDir: await tempDir(), log: quiet, touchMs: 30 }, async (stillHeld) => {
      expect(() => stillHeld()).not.toThrow();
      // Taken over (this import's touches had failed for five minutes, say).
      await store.put(IMPORT_LOCK_KEY, other);
      // Its next touch finds the lock another's; then the next step stops.
      await eventually(async () => {
        try {
          stillHeld();
          return undefined;
        } catch {
          return true;
        }
      }, 15_000, 'the lock seen lost');
      stillHeld();
    });
    await expect(run).rejects.toBeInstanceOf(ImportLockLostError);
    expect((await holderOf(store)).id).toBe('other');
  });
});
