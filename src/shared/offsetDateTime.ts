// The one parser of the date-times that reports, queries and ops commands carry: light, so the
// command line checks a window without loading the engine.

/**
 * Parses `YYYY-MM-DDTHH:mm:ss[.fff](Z|±HH:MM|±HHMM)` to epoch ms, rejecting
 * impossible dates (Feb 30, hour 25) that Date.parse would roll over.
 */
export function parseOffsetDateTime(value: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):?(\d{2}))$/.exec(value);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const ms = Number(((m[7] ?? '') + '000').slice(0, 3));
  const offHours = m[10] === undefined ? 0 : Number(m[10]);
  const offMinutes = m[11] === undefined ? 0 : Number(m[11]);
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59 || offHours > 14 || offMinutes > 59) {
    return undefined;
  }
  const daysInMonth = new Date(new Date(0).setUTCFullYear(year, month, 0)).getUTCDate();
  if (day < 1 || day > daysInMonth) return undefined;
  const sign = m[9] === '-' ? -1 : 1;
  // Date.UTC reads years 0–99 as 1900–1999; setUTCFullYear takes the year as written.
  const local = new Date(0).setUTCFullYear(year, month - 1, day) + ((hour * 60 + minute) * 60 + second) * 1000 + ms;
  return local - sign * (offHours * 60 + offMinutes) * 60_000;
}
