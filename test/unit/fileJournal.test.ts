// The file store's write-ahead journal: group commit, checkpoints, and replay after a
// power loss (a segment left by another boot) or a process crash (same boot), on real files.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileJournal, readEntries } from '../../src/store/fileJournal.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const JOURNAL = '+journal';
/** Segments stay until the store closes: what a power loss finds. */
const KEEP = { checkpointAfterMs: 3_600_000, rotateAfterMs: 3_600_000 };

const segments = (root: string): string[] => {
  try {
    return fs.readdirSync(path.join(root, JOURNAL)).filter((n) => n.endsWith('.wal'));
  } catch {
    return [];
  }
};
const read = (root: string, key: string): string | undefined => {
  try {
    return fs.readFileSync(path.join(root, ...key.split('/')), 'utf8');
  } catch {
    return undefined;
  }
};

const stores: FileObjectStore[] = [];
function store(root: string, options: ConstructorParameters<typeof FileObjectStore>[1]): FileObjectStore {
  const s = new FileObjectStore(root, options);
  stores.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close().catch(() => undefined)));
});

describe('file journal', () => {
  it('makes concurrent appends durable with fewer flushes than appends (group commit), every entry readable in order', async () => {
    const dir = await tempDir();
    const journal = new FileJournal(dir, (key) => path.join(dir, 'files', key), { ...KEEP, bootId: 'b' });
    const bodies = Array.from({ length: 64 }, (_, i) => Buffer.from(`{"n":${i}}`));
    await Promise.all(bodies.map((body, i) => journal.append(`k/${i}`, body)));
    expect(journal.commits).toBeGreaterThan(0);
    expect(journal.commits).toBeLessThan(64);
    const [segment] = fs.readdirSync(dir);
    const entries = [...readEntries(fs.readFileSync(path.join(dir, segment!)))];
    expect(entries.map((e) => e.key)).toEqual(bodies.map((_, i) => `k/${i}`));
    expect(entries.map((e) => e.body.toString())).toEqual(bodies.map((b) => b.toString()));
    await journal.close();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('reads a segment up to a torn or corrupt entry, and stops at the zero-filled tail', async () => {
    const dir = await tempDir();
    const journal = new FileJournal(dir, (key) => path.join(dir, key), { ...KEEP, bootId: 'b' });
    await journal.append('a', Buffer.from('first'));
    await journal.append('b', Buffer.from('second'));
    const [name] = fs.readdirSync(dir);
    const data = fs.readFileSync(path.join(dir, name!));
    expect(data.length).toBeGreaterThanOrEqual(1 << 20); // allocated ahead, zero-filled
    expect([...readEntries(data)].map((e) => e.key)).toEqual(['a', 'b']);
    const used = data.indexOf('second') + 'second\n'.length;
    // A crash in the middle of the second entry: only the first counts.
    expect([...readEntries(data.subarray(0, used - 3))].map((e) => e.key)).toEqual(['a']);
    // A flipped byte in the second body: its checksum no longer matches.
    const corrupt = Buffer.from(data.subarray(0, used));
    corrupt[data.indexOf('second')] = 0x53;
    expect([...readEntries(corrupt)].map((e) => e.key)).toEqual(['a']);
    await journal.close();
  });
});

describe('file store on its journal', () => {
  it('a checkpoint flushes the files and retires the segments; listings never show the journal', async () => {
    const root = await tempDir();
    const s = store(root, { checkpointAfterMs: 0, rotateAfterMs: 300 });
    expect(await s.createIfAbsent('ingest/pending/p/1.json', 'one')).toBe(true);
    expect(await s.copyIfAbsent('ingest/pending/p/1.json', 'ingest/keys/p/1.json', 'one')).toBe(true);
    await s.sync(['ingest/keys/p/1.json']);
    expect(segments(root).length).toBeGreaterThan(0);
    const keys: string[] = [];
    for await (const info of s.list({ prefix: '' })) keys.push(info.key);
    expect(keys).toEqual(['ingest/keys/p/1.json', 'ingest/pending/p/1.json']);
    // The timer closes the idle segment and retires it.
    await expect.poll(() => segments(root).length, { timeout: 5_000 }).toBe(0);
    expect(read(root, 'ingest/keys/p/1.json')).toBe('one');
  });

  it('"taken" is answered only once the first create is durable', async () => {
    const root = await tempDir();
    const s = store(root, KEEP);
    const order: boolean[] = [];
    const created = await Promise.all(
      ['first', 'second'].map(async (body) => {
        const r = await s.createIfAbsent('k/1.json', body);
        order.push(r);
        return r;
      }),
    );
    expect(created.filter(Boolean)).toHaveLength(1);
    expect(order).toEqual([true, false]);
  });

  it('syncs copies another process made on the directory (an API apart from its worker) without journaling them', async () => {
    const root = await tempDir();
    const api = store(root, KEEP);
    const worker = store(root, KEEP);
    expect(await api.createIfAbsent('ingest/pending/p/9.json', 'record 9')).toBe(true);
    expect(await api.copyIfAbsent('ingest/pending/p/9.json', 'ingest/keys/p/9.json', 'record 9')).toBe(true);
    const before = segments(root);
    await worker.sync(['ingest/keys/p/9.json', 'ingest/keys/p/missing.json']);
    expect(segments(root)).toEqual(before);
    expect(read(root, 'ingest/keys/p/9.json')).toBe('record 9');
  });

  it('after a power loss, a segment of the earlier boot restores lost and torn files, and keeps files rewritten since', async () => {
    const root = await tempDir();
    const before = store(root, { ...KEEP, bootId: 'boot-1' });
    for (const n of [1, 2, 3]) expect(await before.createIfAbsent(`ingest/pending/p/${n}.json`, `record ${n}`)).toBe(true);
    expect(await before.copyIfAbsent('ingest/pending/p/1.json', 'ingest/keys/p/1.json', 'record 1')).toBe(true);
    await before.sync(['ingest/keys/p/1.json']);
    await new Promise((r) => setTimeout(r, 20));
    await before.put('ingest/pending/p/3.json', 'rewritten 3');
    // The loss: what was never flushed on its own is gone or torn; the journal survived.
    const snapshot = await copyJournal(root);
    await before.close();
    await restoreJournal(root, snapshot);
    await fsp.rm(path.join(root, 'ingest/keys/p/1.json'));
    await fsp.rm(path.join(root, 'ingest/pending/p/1.json'));
    // Torn: its data lost, its times those of its creation.
    const torn = path.join(root, 'ingest/pending/p/2.json');
    const { atime, mtime } = await fsp.stat(torn);
    await fsp.truncate(torn, 0);
    await fsp.utimes(torn, atime, mtime);

    const after = store(root, { ...KEEP, bootId: 'boot-2' });
    expect((await after.get('ingest/pending/p/1.json'))?.body.toString()).toBe('record 1');
    expect(read(root, 'ingest/keys/p/1.json')).toBe('record 1');
    expect(read(root, 'ingest/pending/p/2.json')).toBe('record 2');
    expect(read(root, 'ingest/pending/p/3.json')).toBe('rewritten 3');
    expect(segments(root)).toEqual([]);
  });

  it('after a process crash in this boot, its segment is only checkpointed: objects deleted since stay deleted', async () => {
    const root = await tempDir();
    const crashed = store(root, { ...KEEP, bootId: 'boot-1' });
    expect(await crashed.createIfAbsent('ingest/pending/p/1.json', 'record 1')).toBe(true);
    expect(await crashed.createIfAbsent('ingest/pending/p/2.json', 'record 2')).toBe(true);
    await crashed.delete(['ingest/pending/p/1.json']);
    const snapshot = await copyJournal(root);
    await crashed.close();
    await restoreJournal(root, snapshot);

    const next = store(root, { ...KEEP, bootId: 'boot-1' });
    expect(await next.head('ingest/pending/p/1.json')).toBeUndefined();
    expect(read(root, 'ingest/pending/p/2.json')).toBe('record 2');
    expect(segments(root)).toEqual([]);
  });

  it('leaves the segments of a live process alone, and replays them once it is from another boot', async () => {
    const root = await tempDir();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      const writer = new FileJournal(path.join(root, JOURNAL), (key) => path.join(root, key), { ...KEEP, bootId: 'boot-1' });
      await writer.append('lost.json', Buffer.from('kept by the journal'));
      // The segment as the live child would have named it.
      const [name] = segments(root);
      const live = name!.replace(/_\d+_/, `_${child.pid}_`);
      await fsp.rename(path.join(root, JOURNAL, name!), path.join(root, JOURNAL, live));

      const sameBoot = store(root, { ...KEEP, bootId: 'boot-1' });
      expect(await sameBoot.head('lost.json')).toBeUndefined();
      expect(segments(root)).toEqual([live]);

      const otherBoot = store(root, { ...KEEP, bootId: 'boot-2' });
      expect((await otherBoot.get('lost.json'))?.body.toString()).toBe('kept by the journal');
      expect(segments(root)).toEqual([]);
    } finally {
      child.kill();
    }
  });
});

async function copyJournal(root: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const name of segments(root)) out.set(name, await fsp.readFile(path.join(root, JOURNAL, name)));
  expect(out.size).toBeGreaterThan(0);
  return out;
}

async function restoreJournal(root: string, snapshot: Map<string, Buffer>): Promise<void> {
  await fsp.mkdir(path.join(root, JOURNAL), { recursive: true });
  for (const [name, data] of snapshot) await fsp.writeFile(path.join(root, JOURNAL, name), data);
}
