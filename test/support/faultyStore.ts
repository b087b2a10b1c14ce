// A store that fails on purpose, for kill points: wraps a real store and throws after the
// n-th successful put under a prefix (the write happened; the caller never learns it).
import type { ObjectStore } from '../../src/store/objectStore.js';

export function failAfterPuts(store: ObjectStore, prefix: string, n: number): ObjectStore {
  let puts = 0;
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'put') {
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return async (key: string, body: Buffer | string) => {
        await target.put(key, body);
        if (key.startsWith(prefix) && ++puts >= n) throw new Error('simulated crash after a write');
      };
    },
  });
}
