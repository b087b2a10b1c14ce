// Whether the objects of a batch of keys exist, found by listing their folders over the batch's
// range of names instead of a HEAD a key. An import accepts thousands of reports a call, each
// looking for its idempotency key and pending marker (and a partner's for its shared ones): on
// S3 a listing page answers for up to 1,000 names in one request, where each HEAD is a round
// trip and, through the SDK, about a millisecond of this process's CPU.
import type { ObjectStore } from '../store/objectStore.js';

/** Names a listing may read per name looked for (a folder crowded within the range) before it stops. */
const READ_PER_KEY = 4;
/** And at least this many: a listing page. */
const READ_AT_LEAST = 1_000;

/**
 * Whether `key` existed when its folder was listed: true or false, or undefined for a key the
 * listing did not reach (it stopped at its budget, or the key was not asked for): the caller
 * reads it.
 */
export type ListedKeys = (key: string) => boolean | undefined;

/**
 * Lists the folders of `keys` (each key's folder is up to its last '/') from their first key to
 * their last, in the store's key order, each folder at once. Keys are compared as the store
 * orders them (byte order, which JavaScript's string order is for the ASCII names of the ledger).
 */
export async function listedKeys(store: Pick<ObjectStore, 'list'>, keys: readonly string[]): Promise<ListedKeys> {
  const byFolder = new Map<string, string[]>();
  for (const key of keys) {
    const folder = folderOf(key);
    const names = byFolder.get(folder);
    if (names) names.push(key);
    else byFolder.set(folder, [key]);
  }
  const present = new Set<string>();
  /** Per folder, the last key its listing answers for: every key up to it is known. */
  const knownTo = new Map<string, string>();
  await Promise.all(
    [...byFolder].map(async ([folder, names]) => {
      names.sort();
      const [first, last] = [names[0]!, names[names.length - 1]!];
      const budget = Math.max(READ_AT_LEAST, READ_PER_KEY * names.length);
      // Exclusive, and just before `first` (its last character dropped): the listing starts with it.
      let reached = first.slice(0, -1);
      let read = 0;
      let whole = true;
      for await (const { key } of store.list({ prefix: folder, startAfter: reached })) {
        if (key > last) break;
        present.add(key);
        reached = key;
        if (++read >= budget) {
          whole = false;
          break;
        }
      }
      knownTo.set(folder, whole ? last : reached);
    }),
  );
  return (key) => {
    const to = knownTo.get(folderOf(key));
    return to !== undefined && key <= to ? present.has(key) : undefined;
  };
}

/** A key's folder: the key up to its last '/', included. */
const folderOf = (key: string) => key.slice(0, key.lastIndexOf('/') + 1);
