// Shared checks of the fault suite.
import { expect } from 'vitest';

/** The error shape of the HTTP contract, and no internals in it. */
export function expectErrorShape(body: any, status: number): void {
  expect(body).toMatchObject({ statusCode: status, error: expect.any(String), message: expect.any(String), details: expect.any(Array) });
  expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'statusCode']);
  expect(JSON.stringify(body)).not.toMatch(/at .*\.(ts|js):\d+/);
}
