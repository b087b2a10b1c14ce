// Failed authentications (401, 403) counted per client address, checked before a presented key
// is looked up: past the limit an address is answered 429 without a lookup (a key known good
// aside: auth.ts), so guessing keys costs neither a ledger read (an S3 GET on AWS) nor much
// else, and stays slow.
import { HttpError } from '../shared/errors.js';

const WINDOW_MS = 60_000;
/** Past this many addresses, expired ones are swept out as failures are counted. */
const SWEEP_ABOVE = 10_000;

export class AuthFailureLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Throws 429 when `client` failed to authenticate `perMinute` times in its current minute. */
  check(client: string): void {
    const window = this.windows.get(client);
    if (!window) return;
    const now = this.now();
    if (window.resetAt <= now) {
      this.windows.delete(client);
      return;
    }
    if (window.count < this.perMinute) return;
    const seconds = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
    throw new HttpError(
      429,
      `${this.perMinute} failed authentications from this address within a minute; retry after ${seconds} seconds with a valid X-Api-Key.`,
      [{ in: 'header', field: 'X-Api-Key', message: 'failed too often from this address' }],
      { 'Retry-After': String(seconds) },
    );
  }

  /** Counts one failed authentication of `client`. */
  fail(client: string): void {
    const now = this.now();
    const window = this.windows.get(client);
    if (window && window.resetAt > now) {
      window.count += 1;
      return;
    }
    if (this.windows.size >= SWEEP_ABOVE) {
      for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
    }
    this.windows.set(client, { count: 1, resetAt: now + WINDOW_MS });
  }
}
