import { describe, expect, it } from 'vitest';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { PlaceNames, placesOf } from '../../src/boundaries/placeNames.js';
import { InvalidReportError, parsePartnerReport } from '../../src/partners/partnerReport.js';
import { parseOffsetDateTime } from '../../src/shared/offsetDateTime.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

/** The places of the two-city set the service ships: what the feed checks partner_city against on a fresh start. */
const PLACES = new PlaceNames(placesOf(await defaultBoundaries()));

const NOW = Date.parse('2026-11-21T12:00:00Z');
const valid = {
  post_id: 42,
  created_at: '2026-11-21T13:05:00+08:00',
  partner_city: 'Quezon City',
  disaster_type: 'flood',
  location: { lat: 14.6516, lng: 121.0497 },
};

function problems(body: unknown, places: PlaceNames = PLACES): { field: string; message: string }[] {
  try {
    parsePartnerReport(body, NOW, places);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidReportError);
    return (err as InvalidReportError).details;
  }
  throw new Error('expected the report to be rejected');
}

describe('partner report', () => {
  it('normalises a valid report: UTC created_at with ms, nulls for missing optionals', () => {
    expect(parsePartnerReport(valid, NOW, PLACES)).toEqual({
      post_id: 42,
      created_at: '2026-11-21T05:05:00.000Z',
      title: null,
      text: null,
      image_url: null,
      partner_city: 'Quezon City',
      disaster_type: 'flood',
      location: { lat: 14.6516, lng: 121.0497 },
    });
  });

  it('keeps partner_city as the canonical name of the place it names, forgiving case and spacing', () => {
    expect(parsePartnerReport({ ...valid, partner_city: 'quezon  CITY' }, NOW, PLACES).partner_city).toBe('Quezon City');
    expect(parsePartnerReport({ ...valid, partner_city: 'PAMPANGA' }, NOW, PLACES).partner_city).toBe('Pampanga');
    expect(problems({ ...valid, partner_city: 'Manila' })).toEqual([{ in: 'body', field: 'partner_city', message: expect.stringMatching(/^is not a city, municipality or province of the current boundaries; closest: "/) }]);
    // Without the boundaries (the worker re-reading what was accepted), it is kept as it came.
    expect(parsePartnerReport({ ...valid, partner_city: 'quezon city' }, NOW).partner_city).toBe('quezon city');
  });

  it('takes any city, municipality or province of the national boundaries, and asks which where a name repeats', async () => {
    const national = new PlaceNames(placesOf(await loadNationalBoundaries()));
    expect(parsePartnerReport({ ...valid, partner_city: 'Cebu City' }, NOW, national).partner_city).toBe('City of Cebu');
    expect(parsePartnerReport({ ...valid, partner_city: 'penarrubia' }, NOW, national).partner_city).toBe('Peñarrubia');
    expect(parsePartnerReport({ ...valid, partner_city: 'Quezon City' }, NOW, national).partner_city).toBe('Quezon City');
    expect(parsePartnerReport({ ...valid, partner_city: 'Pampanga' }, NOW, national).partner_city).toBe('Pampanga');
    const [ambiguous] = problems({ ...valid, partner_city: 'San Jose' }, national);
    expect(ambiguous).toMatchObject({ field: 'partner_city', message: expect.stringMatching(/^names several places; send one of: .*"San Jose, Batangas"/) });
    // Each suggestion is itself accepted.
    const suggested = [...ambiguous!.message.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
    expect(suggested.length).toBeGreaterThan(1);
    for (const label of suggested) expect(parsePartnerReport({ ...valid, partner_city: label }, NOW, national).partner_city).toBe(label);
    // With other problems, every one is listed.
    expect(problems({ ...valid, partner_city: 'San Jose', disaster_type: 'fire' }, national).map((d) => d.field).sort()).toEqual(['disaster_type', 'partner_city']);
  });

  it('accepts a post_id given as a string of digits, normalised (leading zeros too)', () => {
    expect(parsePartnerReport({ ...valid, post_id: '9007199254740991' }, NOW).post_id).toBe(9007199254740991);
    expect(parsePartnerReport({ ...valid, post_id: '0123' }, NOW).post_id).toBe(123);
    expect(parsePartnerReport({ ...valid, post_id: '000000000000000000009007199254740991' }, NOW).post_id).toBe(9007199254740991);
    expect(parsePartnerReport({ ...valid, post_id: '000' }, NOW).post_id).toBe(0);
    expect(problems({ ...valid, post_id: '12a' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: '' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: ' 12' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: '+12' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: '0009007199254740992' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: 9007199254740992 })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: '9007199254740993' })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: 1.5 })[0]?.field).toBe('post_id');
    expect(problems({ ...valid, post_id: -1 })[0]?.field).toBe('post_id');
  });

  it.each([
    ['2026-11-21T05:05:00Z', '2026-11-21T05:05:00.000Z'],
    ['2026-11-21T13:05:00+0800', '2026-11-21T05:05:00.000Z'],
    ['2026-11-21T13:05:00.123456+08:00', '2026-11-21T05:05:00.123Z'],
    ['2026-11-20T23:05:00-06:00', '2026-11-21T05:05:00.000Z'],
  ])('reads created_at %s as %s', (input, expected) => {
    expect(parsePartnerReport({ ...valid, created_at: input }, NOW).created_at).toBe(expected);
  });

  it.each(['2026-11-21T13:05:00', '2026-11-21 13:05:00Z', '2026-02-30T00:00:00Z', '2026-11-21T24:00:00Z', '21/11/2026', ''])(
    'rejects created_at %j',
    (input) => {
      expect(problems({ ...valid, created_at: input }).map((d) => d.field)).toEqual(['created_at']);
    },
  );

  it('rejects created_at more than an hour in the future, but not 59 minutes', () => {
    expect(problems({ ...valid, created_at: '2026-11-21T13:01:00Z' })[0]?.message).toMatch(/future/);
    expect(parsePartnerReport({ ...valid, created_at: '2026-11-21T12:59:00Z' }, NOW).created_at).toBe('2026-11-21T12:59:00.000Z');
  });

  it('lists every problem, each naming its field', () => {
    const fields = problems({
      post_id: 'x',
      created_at: 5,
      partner_city: 'Manila',
      disaster_type: 'fire',
      location: { lat: 91, lng: -181 },
      image_url: 'ftp://example.org/a.png',
      extra: true,
    }).map((d) => d.field);
    expect(fields.sort()).toEqual(
      ['created_at', 'disaster_type', 'extra', 'image_url', 'location.lat', 'location.lng', 'partner_city', 'post_id'].sort(),
    );
  });

  it("lists the problems the schema finds and those of the checks beyond it together, never one list after the other", () => {
    const found = problems({
      post_id: '9007199254740992',
      created_at: '2030-01-01T00:00:00Z',
      partner_city: 'Quezon City',
      disaster_type: 'fire',
      location: { lat: 14.6, lng: 121 },
      title: 'a\u0000b',
      text: 'lone \ud800',
      image_url: 'http://example.org:99999/a.jpg',
    });
    expect(found.map((d) => d.field).sort()).toEqual(['created_at', 'disaster_type', 'image_url', 'post_id', 'text', 'title'].sort());
    expect(found.find((d) => d.field === 'created_at')!.message).toMatch(/future/);
    // A field the schema refused is named once, for the schema's reason.
    expect(problems({ ...valid, disaster_type: 'fire', created_at: 'yesterday' }).map((d) => d.field).sort()).toEqual(['created_at', 'disaster_type']);
  });

  it('says how to mend an image_url: lower-case scheme, RFC 3986 escapes; refuses a password that would be published', () => {
    const message = (image_url: string) => problems({ ...valid, image_url }).find((d) => d.field === 'image_url')?.message;
    expect(message('HTTPS://example.org/x.jpg')).toMatch(/lower case/);
    expect(message('https://example.org/ph/ü.jpg')).toMatch(/percent-encoded \(%C3%BC for ü\)/);
    expect(message('https://bücher.example/x.jpg')).toMatch(/punycode/);
    expect(message('https://example.org/a b.jpg')).toMatch(/percent-encoded/);
    expect(message('https://example.org/x.jpg?q=a|b')).toMatch(/\| \{ \}/);
    expect(message('https://user:pw@example.org/x.jpg')).toMatch(/user name or password/);
    expect(parsePartnerReport({ ...valid, image_url: 'https://example.org/ph/%C3%BC.jpg' }, NOW, PLACES).image_url).toBe('https://example.org/ph/%C3%BC.jpg');
  });

  it('names missing required fields, nested ones with their path', () => {
    const fields = problems({ location: {} }).map((d) => d.field);
    expect(fields.sort()).toEqual(
      ['created_at', 'disaster_type', 'location.lat', 'location.lng', 'partner_city', 'post_id'].sort(),
    );
  });

  it.each([null, [], 'text', 42])('rejects a body that is not an object: %j', (body) => {
    expect(problems(body)[0]?.field).toBe('(body)');
  });

  it('keeps optional fields and accepts an https image URL', () => {
    const r = parsePartnerReport({ ...valid, title: 'Baha', text: 'Hanggang tuhod', image_url: 'https://img.example.org/a.jpg' }, NOW);
    expect([r.title, r.text, r.image_url]).toEqual(['Baha', 'Hanggang tuhod', 'https://img.example.org/a.jpg']);
  });

  it('parseOffsetDateTime reads a fraction of one to nine digits as its milliseconds, the digits after the third cut', () => {
    const base = Date.UTC(2026, 10, 21);
    expect(['.5', '.05', '.123', '.9999', '.123456789', ''].map((f) => parseOffsetDateTime(`2026-11-21T00:00:00${f}Z`)! - base)).toEqual([500, 50, 123, 999, 123, 0]);
    expect(parseOffsetDateTime('2026-11-21T08:00:00.5+08:00')).toBe(base + 500);
    expect(parseOffsetDateTime('2026-11-20T23:30:00.25-0030')).toBe(base + 250);
    // A window's start between two milliseconds is the later; zeros past the third digit are none.
    expect(['.5', '.1230', '.123000001', '.9999', '.000001'].map((f) => parseOffsetDateTime(`2026-11-21T00:00:00${f}Z`, true)! - base)).toEqual([500, 123, 124, 1000, 1]);
  });

  it('parseOffsetDateTime rejects impossible offsets', () => {
    expect(parseOffsetDateTime('2026-11-21T00:00:00+1500')).toBeUndefined();
    expect(parseOffsetDateTime('2026-11-21T00:00:00+0860')).toBeUndefined();
    expect(parseOffsetDateTime('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
  });
});

describe('years below 100', () => {
  it.each(['0099-06-15T12:00:00Z', '0070-01-01T00:00:00Z', '0000-02-29T00:00:00Z', '0001-01-01T00:00:00+14:00'])('parseOffsetDateTime reads %s as written', (input) => {
    expect(parseOffsetDateTime(input)).toBe(Date.parse(input));
    expect(new Date(parseOffsetDateTime(input)!).toISOString().slice(0, 4)).not.toMatch(/^19/);
  });

  it('the calendar of year 0099 is that of 0099 (not a leap year), not of 1999', () => {
    expect(parseOffsetDateTime('0099-02-29T00:00:00Z')).toBeUndefined();
    expect(parseOffsetDateTime('0096-02-29T00:00:00Z')).toBe(Date.parse('0096-02-29T00:00:00Z'));
  });

  it('a report dated before 1970 is rejected naming created_at', () => {
    expect(problems({ ...valid, created_at: '0099-06-15T12:00:00Z' })).toEqual([{ in: 'body', field: 'created_at', message: 'must not be before 1970-01-01T00:00:00Z' }]);
    expect(parsePartnerReport({ ...valid, created_at: '1970-01-01T00:00:00Z' }, NOW).created_at).toBe('1970-01-01T00:00:00.000Z');
    // The same instant written as 1969 west of UTC is taken; a millisecond before it is not.
    expect(parsePartnerReport({ ...valid, created_at: '1969-12-31T20:00:00-04:00' }, NOW).created_at).toBe('1970-01-01T00:00:00.000Z');
    expect(problems({ ...valid, created_at: '1969-12-31T19:59:59.999-04:00' })).toEqual([{ in: 'body', field: 'created_at', message: 'must not be before 1970-01-01T00:00:00Z' }]);
  });
});

describe('the published created_at pattern says what the parser takes', () => {
  it('matches exactly the real dates from year 1969 (1970 in UTC west of it) that parseOffsetDateTime reads', async () => {
    const { default: fc } = await import('fast-check');
    const { DATE_TIME_PATTERN } = await import('../../src/partners/partnerReport.js');
    const pattern = new RegExp(DATE_TIME_PATTERN);
    const d = (n: number, max: number) => fc.integer({ min: 0, max }).map((v) => String(v).padStart(n, '0'));
    const shaped = fc
      .tuple(fc.oneof(d(4, 9999), fc.integer({ min: 1960, max: 2500 }).map(String)), d(2, 13), d(2, 32), d(2, 25), d(2, 61), d(2, 61), fc.constantFrom('', '.5', '.123456789'), fc.constantFrom('Z', '+08:00', '-0530', '+14:59', '+15:00', '-00:60'))
      .map(([y, mo, da, h, mi, s, f, o]) => `${y}-${mo}-${da}T${h}:${mi}:${s}${f}${o}`);
    fc.assert(
      fc.property(shaped, (value) => {
        const ms = parseOffsetDateTime(value);
        const taken = ms !== undefined && Number(value.slice(0, 4)) >= 1969;
        expect(pattern.test(value), value).toBe(taken);
      }),
      { numRuns: 5000 },
    );
  });
});
