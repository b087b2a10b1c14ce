// The CLI's --from and --to read as the archive endpoint reads start and end: a date is a whole
// UTC day, and an end to the second covers all of that second (reports keep milliseconds), so
// back-to-back windows by the second leave nothing between them.
import { describe, expect, it } from 'vitest';
import { windowOf } from '../../src/main/cli/options.js';

describe('a command window (--from, --to)', () => {
  it('takes a whole day for a date, and all of the last second for an end to the second', () => {
    expect(windowOf({ from: '2026-11-21', to: '2026-11-21' })).toEqual({ fromMs: Date.parse('2026-11-21T00:00:00Z'), toMs: Date.parse('2026-11-21T23:59:59.999Z') });
    // A Philippine day by the second: its last second whole, as GET /reports/archive has it.
    expect(windowOf({ from: '2026-11-21T00:00:00+08:00', to: '2026-11-21T23:59:59+08:00' })).toEqual({
      fromMs: Date.parse('2026-11-20T16:00:00Z'),
      toMs: Date.parse('2026-11-21T15:59:59.999Z'),
    });
  });

  it('takes an end with a fraction as sent, and never moves a start', () => {
    expect(windowOf({ from: '2026-11-21T05:00:00Z', to: '2026-11-21T05:00:00.5Z' })).toEqual({ fromMs: Date.parse('2026-11-21T05:00:00Z'), toMs: Date.parse('2026-11-21T05:00:00.500Z') });
    expect(windowOf({ from: '2026-11-21T05:00:00Z', to: '2026-11-21T05:00:00Z' })).toEqual({ fromMs: Date.parse('2026-11-21T05:00:00Z'), toMs: Date.parse('2026-11-21T05:00:00.999Z') });
  });

  it('takes a start between two milliseconds as the later, an end as the earlier: a report at the seam of two windows is in one', () => {
    expect(windowOf({ from: '2026-11-21T05:00:00.000500Z', to: '2026-11-21T05:00:01.000500Z' })).toEqual({ fromMs: Date.parse('2026-11-21T05:00:00.001Z'), toMs: Date.parse('2026-11-21T05:00:01.000Z') });
  });
});
