// Periods a release may be of, the ids of releases, and the periods the monthly job releases.
import { describe, expect, it } from 'vitest';
import { lastMonth, periodsToRelease } from '../../jobs/release.js';
import { parsePeriod, parseReleaseId, releaseId } from '../../src/releases/layout.js';

describe('release periods and ids', () => {
  it('cuts a year into its twelve UTC months, and a month into itself, ends inclusive to the millisecond', () => {
    const year = parsePeriod('2024')!;
    expect(year.months.map((m) => m.label)).toEqual(['01', '02', '03', '04', '05', '06', '07', '08', '09', '10', '11', '12'].map((m) => `2024-${m}`));
    expect(new Date(year.startMs).toISOString()).toBe('2024-01-01T00:00:00.000Z');
    expect(new Date(year.endMs).toISOString()).toBe('2024-12-31T23:59:59.999Z');
    // A leap February, each month ending where the next begins.
    expect(new Date(year.months[1]!.endMs).toISOString()).toBe('2024-02-29T23:59:59.999Z');
    for (let i = 1; i < 12; i++) expect(year.months[i]!.startMs).toBe(year.months[i - 1]!.endMs + 1);
    expect(parsePeriod('2025-06')!.months).toEqual([{ label: '2025-06', startMs: Date.UTC(2025, 5, 1), endMs: Date.UTC(2025, 6, 1) - 1 }]);
    for (const bad of ['2025-00', '2025-13', '1969', '25', '2025-6', '2025-06-01', '']) expect(parsePeriod(bad)).toBeUndefined();
  });

  it('names a release by its period and revision, and reads the name back', () => {
    expect(releaseId('2025-06', 3)).toBe('2025-06-r3');
    expect(parseReleaseId('2025-06-r3')).toEqual({ period: '2025-06', revision: 3 });
    expect(parseReleaseId('2025-r1')).toEqual({ period: '2025', revision: 1 });
    for (const bad of ['2025-r0', '2025', '2025-06-r', '../2025-r1', '2025-r01']) expect(parseReleaseId(bad)).toBeUndefined();
  });

  it('releases, each month, the UTC month just closed (December in January)', () => {
    expect(lastMonth(Date.UTC(2026, 10, 2, 3, 30))).toBe('2026-10');
    expect(lastMonth(Date.UTC(2027, 0, 2, 3, 30))).toBe('2026-12');
  });

  it('makes up the months a missed or failed tick left out, and releases again the periods released in the year before', () => {
    const now = Date.UTC(2026, 10, 2, 3, 30);
    // Nothing released yet: the month just closed.
    expect(periodsToRelease([], now)).toEqual(['2026-10']);
    // The ticks of September and October missed: from the latest month released on.
    expect(periodsToRelease(['2026-06', '2026-07', '2026-08'], now)).toEqual(['2026-06', '2026-07', '2026-08', '2026-09', '2026-10']);
    // A year released, and months released long ago: those within the year before again, at most twelve months made up.
    expect(periodsToRelease(['2025', '2024', '2024-03'], now)).toEqual(['2025', '2025-11', '2025-12', '2026-01', '2026-02', '2026-03', '2026-04', '2026-05', '2026-06', '2026-07', '2026-08', '2026-09', '2026-10']);
    // Up to date: the month just closed and the months of the year before, each again (the same reports make no new revision).
    expect(periodsToRelease(['2026-09', '2026-10'], now)).toEqual(['2026-09', '2026-10']);
    // A month that failed while a later one was made: made up all the same.
    expect(periodsToRelease(['2026-06', '2026-08', '2026-10'], now)).toEqual(['2026-06', '2026-07', '2026-08', '2026-09', '2026-10']);
    // The job's very first month failed (nothing released yet): made up from the month it first set out to release.
    expect(periodsToRelease([], now, '2026-09')).toEqual(['2026-09', '2026-10']);
    expect(periodsToRelease(['2026-10'], now, '2026-08')).toEqual(['2026-08', '2026-09', '2026-10']);
    // No earlier than the year before, nor later than the month just closed.
    expect(periodsToRelease([], now, '2024-01')).toHaveLength(12);
    expect(periodsToRelease([], now, '2026-11')).toEqual(['2026-10']);
  });
});
