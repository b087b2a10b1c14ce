// The window's parts come from a listing of each of its months (the first from its first hour),
// or, for a window of a few days, of each of its days: never from keys past the window's folders.
import { describe, expect, it } from 'vitest';
import { listWindowParts } from '../../src/archive/partListing.js';
import { groupBySize } from '../../src/archive/plan.js';
import { DAY_MS, dayPrefix, dayStart, hourStart, newDayPartKey, newPartKey, partitionOfPartKey } from '../../src/store/layout.js';
import type { ListOptions } from '../../src/store/objectStore.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const at = (iso: string) => Date.parse(iso);

describe('part keys', () => {
  it('name hours and compacted days, and read back where a part belongs', () => {
    const hour = newPartKey(at('2026-11-21T13:00:00Z'));
    expect(hour).toMatch(/^reports\/v1\/year=2026\/month=11\/day=21\/hour=13\/part-[0-9A-Z]{26}\.parquet$/);
    expect(partitionOfPartKey(hour)).toEqual({ startMs: at('2026-11-21T13:00:00Z'), wholeDay: false });
    const day = newDayPartKey(at('2026-11-21T13:45:00Z'));
    expect(day).toMatch(/^reports\/v1\/year=2026\/month=11\/day=21\/hour=all\/part-[0-9A-Z]{26}\.parquet$/);
    expect(partitionOfPartKey(day)).toEqual({ startMs: at('2026-11-21T00:00:00Z'), wholeDay: true });
    // A day's compacted part sorts after its hours and before the next day.
    expect([newPartKey(at('2026-11-22T00:00:00Z')), day, newPartKey(at('2026-11-21T23:00:00Z'))].sort()[1]).toBe(day);
    expect(partitionOfPartKey('reports/v1/year=2026/month=11/day=21/hour=al/part-01ARZ3NDEKTSV4RRFFQ69G5FAV.parquet')).toBeUndefined();
    expect(partitionOfPartKey('reports/v1/year=2026/month=11/day=21/hour=13/notes.txt')).toBeUndefined();
  });
});

describe('listWindowParts', () => {
  it('finds the hours in the window and the compacted parts of the days it touches, and nothing else', async () => {
    const store = new FileObjectStore(await tempDir());
    const keys = {
      day20: newDayPartKey(at('2026-11-20T00:00:00Z')),
      h20_23: newPartKey(at('2026-11-20T23:00:00Z')),
      day21: newDayPartKey(at('2026-11-21T00:00:00Z')),
      h21_05: newPartKey(at('2026-11-21T05:00:00Z')),
      h21_06: newPartKey(at('2026-11-21T06:00:00Z')),
      day22: newDayPartKey(at('2026-11-22T00:00:00Z')),
      h22_00: newPartKey(at('2026-11-22T00:00:00Z')),
    };
    for (const key of Object.values(keys)) await store.put(key, 'x');

    // 2026-11-20 23:30 to 2026-11-21 05:10: the 23h and 05h hours, both days' compacted parts.
    const got = await listWindowParts(store, at('2026-11-20T23:30:00Z'), at('2026-11-21T05:10:00Z'));
    expect(got.map((p) => [new Date(p.hourMs).toISOString(), p.wholeDay, p.parts.map((i) => i.key)])).toEqual([
      ['2026-11-20T23:00:00.000Z', false, [keys.h20_23]],
      ['2026-11-20T00:00:00.000Z', true, [keys.day20]],
      ['2026-11-21T05:00:00.000Z', false, [keys.h21_05]],
      ['2026-11-21T00:00:00.000Z', true, [keys.day21]],
    ]);
  });
});

describe('listWindowParts by folders', () => {
  it('asks the store for each day of a window of a few days, each month of a longer one, and finds the parts in the window in key order', async () => {
    const store = new FileObjectStore(await tempDir());
    const first = at('2026-11-01T00:00:00Z');
    const keys: string[] = [];
    for (let d = 0; d < 12; d++) {
      const day = first + d * DAY_MS;
      keys.push(newDayPartKey(day));
      for (const h of [0, 11, 11, 23]) keys.push(newPartKey(day + h * 3_600_000));
    }
    // What the window holds: its hours' parts and its days' compacted parts, in key order.
    const expected = (startMs: number, endMs: number) =>
      [...keys]
        .sort()
        .filter((key) => {
          const { startMs: t, wholeDay } = partitionOfPartKey(key)!;
          return wholeDay ? t >= dayStart(startMs) && t <= dayStart(endMs) : t >= hourStart(startMs) && t <= hourStart(endMs);
        });
    // Parts of other months: in a window only where its time holds them.
    for (const month of ['2026-09-15T00:00:00Z', '2026-10-31T23:00:00Z', '2026-12-01T00:00:00Z', '2027-02-03T04:00:00Z']) {
      keys.push(newDayPartKey(at(month)), newPartKey(at(month)));
    }
    for (const key of keys) await store.put(key, 'x');
    // A window of up to a week is listed a day at a time; a longer one a month at a time.
    const windows: [string, string, 'by day' | ListOptions[]][] = [
      ['2026-11-03T11:30:00Z', '2026-11-03T11:40:00Z', 'by day'],
      ['2026-11-03T11:30:00Z', '2026-11-04T23:59:59Z', 'by day'],
      ['2026-11-02T00:00:00Z', '2026-11-08T23:59:59.999Z', 'by day'],
      ['2026-11-02T12:00:00Z', '2026-11-10T00:00:00Z', [{ prefix: 'reports/v1/year=2026/month=11/', startAfter: 'reports/v1/year=2026/month=11/day=02/hour=12/' }]],
      ['2026-10-30T00:00:00Z', '2026-11-02T05:00:00Z', 'by day'],
      [
        '2026-10-25T06:00:00Z',
        '2026-11-06T00:00:00Z',
        [{ prefix: 'reports/v1/year=2026/month=10/', startAfter: 'reports/v1/year=2026/month=10/day=25/hour=06/' }, { prefix: 'reports/v1/year=2026/month=11/' }],
      ],
      [
        '2025-12-31T00:00:00Z',
        '2027-01-31T23:59:59.999Z',
        [
          { prefix: 'reports/v1/year=2025/month=12/', startAfter: 'reports/v1/year=2025/month=12/day=31/hour=00/' },
          ...Array.from({ length: 12 }, (_, m) => ({ prefix: `reports/v1/year=2026/month=${String(m + 1).padStart(2, '0')}/` })),
          { prefix: 'reports/v1/year=2027/month=01/' },
        ],
      ],
      // Years (the whole archive: its extent, a sync of everything): one listing from the first hour.
      ['1970-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', [{ prefix: 'reports/v1/', startAfter: 'reports/v1/year=1970/month=01/day=01/hour=00/' }]],
      ['2024-11-30T00:00:00Z', '2026-11-07T23:59:59.999Z', [{ prefix: 'reports/v1/', startAfter: 'reports/v1/year=2024/month=11/day=30/hour=00/' }]],
    ];
    for (const [from, to, listed] of windows) {
      const asked: ListOptions[] = [];
      const got = await listWindowParts({ list: (options) => (asked.push(options), store.list(options)) }, at(from), at(to));
      expect(got.flatMap((p) => p.parts.map((i) => i.key)), `${from} ${to}`).toEqual(expected(at(from), at(to)));
      const days = (dayStart(at(to)) - dayStart(at(from))) / DAY_MS + 1;
      if (listed === 'by day') expect(asked, `${from} ${to}`).toEqual(Array.from({ length: days }, (_, i) => ({ prefix: dayPrefix(dayStart(at(from)) + i * DAY_MS) })));
      else expect(asked, `${from} ${to}`).toEqual(listed);
    }
  });
});

describe('groupBySize', () => {
  it('splits a day into consecutive runs of about the limit, never splitting one item', () => {
    const sizes: Record<string, number> = { a: 100, b: 200, c: 50, d: 400, e: 10 };
    expect(groupBySize(Object.keys(sizes), (k) => sizes[k]!, 300)).toEqual([['a', 'b'], ['c'], ['d'], ['e']]);
    expect(groupBySize(['a', 'b', 'c'], (k) => sizes[k]!, 10_000)).toEqual([['a', 'b', 'c']]);
    expect(groupBySize([], () => 1, 10)).toEqual([]);
  });
});
