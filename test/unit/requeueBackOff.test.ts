// When the S3 ledger sends a pending report again: it cannot see whether the queue still holds
// its message, so a report that is only late (workers down or behind) must not be sent again
// every period, or a backlog of thousands floods the queue and the store.
import { describe, expect, it } from 'vitest';
import { sendsAgain } from '../../src/ledger/objectLedger.js';

/** The times (s) a report accepted at 0 is sent again by runs every `everyS` seconds, up to `untilS`. */
function sendings(periodS: number, everyS: number, untilS: number): number[] {
  let sentS = 0;
  const out: number[] = [];
  for (let t = everyS; t <= untilS; t += everyS) {
    if (sendsAgain({ nowMs: t * 1000, sentMs: sentS * 1000, acceptedMs: 0, periodMs: periodS * 1000 })) {
      out.push(t);
      sentS = t;
    }
  }
  return out;
}

describe('sending a pending report again', () => {
  it('waits one period first, then twice as long each time, up to eight periods', () => {
    expect(sendings(60, 30, 3_600)).toEqual([60, 120, 240, 480, 960, 1_440, 1_920, 2_400, 2_880, 3_360]);
  });

  it('sends a report that has waited long every eight periods', () => {
    const at = (nowMs: number) => sendsAgain({ nowMs, sentMs: 86_400_000, acceptedMs: 0, periodMs: 60_000 });
    expect(at(86_400_000 + 8 * 60_000 - 1)).toBe(false);
    expect(at(86_400_000 + 8 * 60_000)).toBe(true);
  });

  it('never before a period has passed since the last sending', () => {
    expect(sendsAgain({ nowMs: 59_000, sentMs: 0, acceptedMs: 0, periodMs: 60_000 })).toBe(false);
    expect(sendsAgain({ nowMs: 60_000, sentMs: 0, acceptedMs: 0, periodMs: 60_000 })).toBe(true);
  });
});
