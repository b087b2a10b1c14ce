// The one parser of the date-times that reports, queries and ops commands carry: light, so the
// command line checks a window without loading the engine.

/** The shape; the fields are then read at their places (an import parses one a record). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})$/;
/** Days of each month in a common year. */
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const DAY_MS = 86_400_000;

/**
 * Parses `YYYY-MM-DDTHH:mm:ss[.fff](Z|±HH:MM|±HHMM)` to epoch ms, rejecting
 * impossible dates (Feb 30, hour 25) that Date.parse would roll over. Digits past the
 * milliseconds are dropped; `roundUp`: an instant between two milliseconds is the later (a
 * window's start: reports keep milliseconds, so one at the earlier is before it).
 */
export function parseOffsetDateTime(value: string, roundUp = false): number | undefined {
  if (!DATE_TIME.test(value)) return undefined;
  const year = digits(value, 0, 4);
  const month = digits(value, 5, 7);
  const day = digits(value, 8, 10);
  const hour = digits(value, 11, 13);
  const minute = digits(value, 14, 16);
  const second = digits(value, 17, 19);
  let at = 19;
  let ms = 0;
  if (value.charCodeAt(at) === 0x2e /* . */) {
    let end = at + 1;
    while (end < value.length && value.charCodeAt(end) >= 0x30 && value.charCodeAt(end) <= 0x39) end++;
    // Milliseconds: the first three digits, as many as there are (".5" is 500).
    const kept = Math.min(end - at - 1, 3);
    ms = digits(value, at + 1, at + 1 + kept) * 10 ** (3 - kept);
    if (roundUp && /[1-9]/.test(value.slice(at + 4, end))) ms += 1;
    at = end;
  }
  let offset = 0;
  if (value.charCodeAt(at) !== 0x5a /* Z */) {
    const offHours = digits(value, at + 1, at + 3);
    const minutesAt = value.charCodeAt(at + 3) === 0x3a /* : */ ? at + 4 : at + 3;
    const offMinutes = digits(value, minutesAt, minutesAt + 2);
    if (offHours > 14 || offMinutes > 59) return undefined;
    offset = (value.charCodeAt(at) === 0x2d /* - */ ? -1 : 1) * (offHours * 60 + offMinutes) * 60_000;
  }
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return undefined;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  if (day < 1 || day > (month === 2 && leap ? 29 : MONTH_DAYS[month - 1]!)) return undefined;
  return daysFromCivil(year, month, day) * DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000 + ms - offset;
}

/** The decimal number the ASCII digits value[from, to) spell. */
function digits(value: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n = n * 10 + value.charCodeAt(i) - 0x30;
  return n;
}

/**
 * Days since 1970-01-01 of a date of the proleptic Gregorian calendar, as Date counts them
 * (years 0–99 as written, not as 1900–1999): Howard Hinnant's days_from_civil.
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}
