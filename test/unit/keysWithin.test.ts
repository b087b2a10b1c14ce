import { describe, expect, it } from 'vitest';
import { keysWithin } from '../../src/http/queryGuards.js';

describe('keysWithin', () => {
  // A generated key's first character may be a hex digit; sent with that character
  // percent-encoded, the text as sent holds the key's last 31 characters behind `%3`.
  const keys = ['5Rk2vYtq9LmN0pQwXz8Bc7De6Fg4Hj3A', 'aRk2vYtq9LmN0pQwXz8Bc7De6Fg4Hj3B', 'Zk2vYtq9LmN0pQwXz8Bc7De6Fg4Hj3Ab'];

  it('leaves nothing of a key whose first character was sent percent-encoded', () => {
    for (const key of keys) {
      const encoded = `%${key.charCodeAt(0).toString(16)}${key.slice(1)}`;
      expect(keysWithin(`/reports/${encoded}.cap`, new Set())).toBe('/reports/[redacted].cap');
      expect(keysWithin(`/reports/${encoded}.cap`, new Set([key]))).toBe('/reports/[redacted].cap');
    }
  });

  it('redacts a key as sent, keeping the text around it as sent', () => {
    const key = keys[0] as string;
    expect(keysWithin(`/health?q=%22${key}%22&n=%2F`, new Set())).toBe('/health?q=%22[redacted]%22&n=%2F');
    expect(keysWithin(`/x/${key}/y/${key}.json`, new Set([key]))).toBe('/x/[redacted]/y/[redacted].json');
  });
});
