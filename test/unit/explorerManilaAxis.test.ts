// The explorer chart's time axis (web/manilaAxis.js, plain JavaScript for the page): ticks on
// Manila's hours, days, months and years, labelled in Manila time, the same in a browser whose
// own zone changes its clocks that day (a tick once moved an hour there and took the wrong label).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

interface Axis {
  manilaSplits(min: number, max: number, incr: number): number[];
  manilaValues(ticks: number[], incr: number): string[];
}

const MODULE = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/manilaAxis.js')).href;
const HOUR = 3600;
const DAY = 86_400;
/** Seconds at a Manila wall-clock time. */
const manila = (iso: string) => Date.parse(`${iso}+08:00`) / 1000;
const zoneBefore = process.env.TZ;

afterAll(() => {
  if (zoneBefore === undefined) delete process.env.TZ;
  else process.env.TZ = zoneBefore;
});

describe("the explorer chart's time axis", () => {
  // Zones whose clocks change on the days below (New York 8 March, London 29 March, Cairo 24 April 2026).
  for (const zone of ['Asia/Manila', 'America/New_York', 'Europe/London', 'Africa/Cairo', 'Pacific/Kiritimati']) {
    it(`ticks on Manila's hours, days, months and years, labelled in Manila time, in a browser in ${zone}`, async () => {
      process.env.TZ = zone;
      const { manilaSplits, manilaValues } = (await import(MODULE)) as Axis;
      const axis = (from: string, to: string, incr: number) => {
        const ticks = manilaSplits(manila(from), manila(to), incr);
        return { ticks, labels: manilaValues(ticks, incr) };
      };
      // Hours across New York's and London's changes (Manila's midnight is 11:00 or 16:00 UTC).
      const hours = axis('2026-03-08T00:00:00', '2026-03-08T05:00:00', HOUR);
      expect(hours.ticks).toEqual([0, 1, 2, 3, 4, 5].map((h) => manila(`2026-03-08T0${h}:00:00`)));
      expect(hours.labels).toEqual(['12am\n3/8', '1am', '2am', '3am', '4am', '5am']);
      expect(axis('2026-03-28T21:30:00', '2026-03-29T04:00:00', 2 * HOUR).labels).toEqual(['10pm\n3/28', '12am\n3/29', '2am', '4am']);
      // Days across Cairo's change: every other day from the first on Manila's midnight.
      const days = axis('2026-04-20T00:00:00', '2026-04-28T00:00:00', 2 * DAY);
      expect(days.ticks.map((t) => (t + 8 * HOUR) % DAY)).toEqual(days.ticks.map(() => 0));
      expect(days.labels).toEqual(['4/20\n2026', '4/22', '4/24', '4/26', '4/28']);
      expect(axis('2025-12-30T12:00:00', '2026-01-02T00:00:00', DAY).labels).toEqual(['12/31\n2025', '1/1\n2026', '1/2']);
      // Months of a year on the first of each (November's not in October in New York), and years.
      const months = axis('2026-01-01T00:00:00', '2026-12-31T23:59:59', 2 * 30 * DAY);
      expect(months.ticks).toEqual(['01', '03', '05', '07', '09', '11'].map((m) => manila(`2026-${m}-01T00:00:00`)));
      expect(months.labels).toEqual(['Jan\n2026', 'Mar', 'May', 'Jul', 'Sep', 'Nov']);
      expect(axis('2025-06-15T00:00:00', '2026-02-10T00:00:00', 3 * 30 * DAY).labels).toEqual(['Jul\n2025', 'Oct', 'Jan\n2026']);
      expect(axis('2019-03-01T00:00:00', '2026-03-01T00:00:00', 2 * 365 * DAY).labels).toEqual(['2020', '2022', '2024', '2026']);
      // Under a minute's step (a minute's window): seconds.
      expect(axis('2026-11-24T13:30:00', '2026-11-24T13:31:20', 20).labels).toEqual(['1:30:00pm\n11/24', ':20', ':40', '1:31:00pm', ':20']);
      // A window starting off the hour: its first tick names its date.
      expect(axis('2026-11-24T13:20:00', '2026-11-24T15:00:00', 30 * 60).labels).toEqual(['1:30pm\n11/24', '2pm', '2:30pm', '3pm']);
    });
  }
});
