import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../../src/shared/config.js';
import { projectDir } from '../../src/shared/projectDir.js';

describe('config', () => {
  it('has a row in the configuration table of docs/operations.md for every variable it reads, and no other', () => {
    const doc = readFileSync(`${projectDir()}/docs/operations.md`, 'utf8');
    const rows = [...doc.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]!);
    expect([...new Set(rows)].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('defaults to the embedded backend under ./data', () => {
    const c = loadConfig({}, '/srv/app');
    expect(c.dataDir).toBe('/srv/app/data');
    expect(c.storageUrl).toBe('file:///srv/app/data/store');
    expect(c.queueUrl).toBe('sqlite:');
    expect(c.port).toBe(8080);
    expect(c.apiKeys).toEqual([]);
    expect(c.archiveMaxWindowMs).toBe(366 * 86_400_000);
    expect(c.cacheDir).toBe('/srv/app/data/cache');
  });

  it('takes PUBLIC_BASE_URL without its trailing slash, and refuses one with a query or no scheme', () => {
    expect(loadConfig({}, '/').publicBaseUrl).toBeUndefined();
    expect(loadConfig({ PUBLIC_BASE_URL: 'https://floods.example.org/archive/' }, '/').publicBaseUrl).toBe('https://floods.example.org/archive');
    for (const bad of ['floods.example.org', 'https://floods.example.org/?a=1', 'https://floods.example.org/#x', 'ftp://floods.example.org']) {
      expect(() => loadConfig({ PUBLIC_BASE_URL: bad }, '/'), bad).toThrow(/PUBLIC_BASE_URL/);
    }
  });

  it('reads every documented variable', () => {
    const c = loadConfig(
      {
        PORT: '9000',
        DATA_DIR: '/var/flood',
        STORAGE_URL: 's3://my-bucket/archive',
        QUEUE_URL: 'https://sqs.ap-southeast-1.amazonaws.com/123456789012/reports',
        AWS_REGION: 'ap-southeast-1',
        AWS_ENDPOINT_URL: 'http://localhost:4566',
        API_KEYS: 'aaaaaaaaaaaaaaaa, partner-b:bbbbbbbbbbbbbbbb',
        FLUSH_INTERVAL_SECONDS: '15',
        ARCHIVE_MAX_WINDOW: '72h',
        CACHE_DIR: '/tmp/cache',
        CACHE_MAX_BYTES: '104857600',
        LOG_LEVEL: 'debug',
      },
      '/',
    );
    expect(c).toMatchObject({
      port: 9000,
      dataDir: '/var/flood',
      storageUrl: 's3://my-bucket/archive',
      awsRegion: 'ap-southeast-1',
      awsEndpointUrl: 'http://localhost:4566',
      // A bare key is named by a short hash of it; a named one keeps its name.
      apiKeys: [
        { name: `key-${createHash('sha256').update('aaaaaaaaaaaaaaaa').digest('hex').slice(0, 8)}`, key: 'aaaaaaaaaaaaaaaa' },
        { name: 'partner-b', key: 'bbbbbbbbbbbbbbbb' },
      ],
      flushIntervalSeconds: 15,
      archiveMaxWindowMs: 72 * 3_600_000,
      cacheDir: '/tmp/cache',
      cacheMaxBytes: 104857600,
      logLevel: 'debug',
    });
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['STORAGE_URL', 'ftp://x'],
    ['STORAGE_URL', 'file://relative/dir'],
    ['QUEUE_URL', 'sqs://q'],
    ['FLUSH_INTERVAL_SECONDS', '0'],
    ['ARCHIVE_MAX_WINDOW', '1y'],
    ['CACHE_MAX_BYTES', '10'],
    ['LOG_LEVEL', 'loud'],
    ['AWS_REGION', 'mars'],
    ['METRICS_PORT', 'nine'],
    ['METRICS_PORT', '8080'],
    ['METRICS_HOST', 'a host'],
    ['RATE_LIMIT_AUTH_FAILURES_PER_MINUTE', '0'],
  ])('rejects %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value }, '/')).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value }, '/')).toThrow(new RegExp(`${name}=`));
  });

  it('names a bad API_KEYS or CURSOR_SECRET, and which entry is wrong, without showing a key or the secret', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ API_KEYS: 'good:goodgoodgoodgood0001,Bad:secretsecretsecret99' }, /API_KEYS \(its keys not shown; entries 2 of 2 malformed\): must be a comma-separated list/],
      [{ API_KEYS: 'goodgoodgoodgood0001, Bad Name:bbbbbbbbbbbbbbbb ,name:short' }, /entries 2, 3 of 3 malformed/],
      [{ API_KEYS: 'shortkey' }, /entries 1 of 1 malformed/],
      [{ CURSOR_SECRET: 'tooshortsecret' }, /CURSOR_SECRET \(its value not shown: a secret; 14 characters\): must be at least 32 characters/],
    ];
    for (const [env, says] of cases) {
      let message = '';
      try {
        loadConfig(env, '/');
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toMatch(says);
      for (const secret of Object.values(env).flatMap((v) => v.split(/[,:]/)).filter((part) => part.trim().length >= 8)) expect(message).not.toContain(secret.trim());
    }
  });

  it('refuses one key given to two partners, naming the entries and not the key: the second would be filed as the first', () => {
    expect(() => loadConfig({ API_KEYS: 'alpha:samekeysamekey0001,beta:samekeysamekey0001' }, '/')).toThrow(/API_KEYS \(its keys not shown\): entry 2 \(beta\) has the key of entry 1 \(alpha\): each partner needs a key of its own/);
    expect(() => loadConfig({ API_KEYS: 'alpha:samekeysamekey0001,samekeysamekey0001' }, '/')).toThrow(/entry 2 \(key-[0-9a-f]{8}\) has the key of entry 1 \(alpha\)/);
    expect(() => loadConfig({ API_KEYS: 'alpha:samekeysamekey0001,beta:samekeysamekey0001' }, '/')).not.toThrow(/samekey/);
    // One partner's key listed twice, and one partner with two keys (a rotation): fine.
    expect(loadConfig({ API_KEYS: 'alpha:samekeysamekey0001,alpha:samekeysamekey0001,alpha:otherkeyotherkey01' }, '/').apiKeys).toHaveLength(3);
  });

  it('refuses a CACHE_DIR that holds, is, or lies inside the file store: its sweeps remove files they did not write', () => {
    const refused = /CACHE_DIR=.*must be a folder of its own, neither holding nor inside the store's folder/;
    expect(() => loadConfig({ DATA_DIR: '/srv/data', CACHE_DIR: '/srv/data' }, '/')).toThrow(refused);
    expect(() => loadConfig({ DATA_DIR: '/srv/data', CACHE_DIR: '/srv/data/store' }, '/')).toThrow(refused);
    expect(() => loadConfig({ STORAGE_URL: 'file:///srv/archive', CACHE_DIR: 'archive/cache' }, '/srv')).toThrow(refused);
    expect(() => loadConfig({ STORAGE_URL: 'file:///srv/archive/', CACHE_DIR: '/srv' }, '/')).toThrow(refused);
    // Beside the store, or with a name that merely starts like it: fine; on S3 there is no folder to guard.
    expect(loadConfig({ DATA_DIR: '/srv/data', CACHE_DIR: '/srv/data/cache' }, '/').cacheDir).toBe('/srv/data/cache');
    expect(loadConfig({ STORAGE_URL: 'file:///srv/archive', CACHE_DIR: '/srv/archive-cache' }, '/').cacheDir).toBe('/srv/archive-cache');
    expect(loadConfig({ STORAGE_URL: 'file:///srv/archive', CACHE_DIR: '/srv/..archive' }, '/').cacheDir).toBe('/srv/..archive');
    expect(loadConfig({ STORAGE_URL: 's3://bucket/archive', CACHE_DIR: '/srv/data' }, '/').cacheDir).toBe('/srv/data');
  });

  it('reads numbers only in decimal and finite: blank, hex and infinite values are refused, naming the variable; a positive duration is never rounded to 0', () => {
    for (const [name, value] of [['PORT', ' '], ['PORT', '0x10'], ['ACCEPT_DEADLINE_SECONDS', 'Infinity'], ['FLUSH_INTERVAL_SECONDS', '1e400'], ['TRUST_PROXY', '\t'], ['HTTP_SEND_STALL_SECONDS', '-Infinity']] as const) {
      expect(() => loadConfig({ [name]: value }, '/'), `${name}=${value}`).toThrow(new RegExp(`${name}=${JSON.stringify(value).replace(/[\\$()*+.?[\]^{|}]/g, '\\$&')}: must be`));
    }
    const c = loadConfig({ PORT: '8081', FLUSH_INTERVAL_SECONDS: '2.5e0', ACCEPT_DEADLINE_SECONDS: '0.0001', HTTP_SEND_STALL_SECONDS: '.5' }, '/');
    expect([c.port, c.flushIntervalSeconds, c.acceptDeadlineMs, c.http.sendStallMs]).toEqual([8081, 2.5, 1, 500]);
  });

  it('refuses a schedule node-cron would refuse or misread, saying which field is wrong', () => {
    expect(() => loadConfig({ SCHEDULE_COMPACT: '61 * * * *' }, '/')).toThrow(/SCHEDULE_COMPACT="61 \* \* \* \*": must be a cron expression.*61 is a invalid expression for minute/);
    // node-cron takes a backwards range and wraps it round: refused.
    expect(() => loadConfig({ SCHEDULE_COMPACT: '5-1 * * * *' }, '/')).toThrow(/SCHEDULE_COMPACT="5-1 \* \* \* \*": the minute range 5-1 runs backwards/);
    expect(() => loadConfig({ SCHEDULE_RELEASE: '0 3 2 12-1 *' }, '/')).toThrow(/the month range 12-1 runs backwards/);
    expect(() => loadConfig({ SCHEDULE_VERIFY: '*/10 30-5/5 * * * *' }, '/')).toThrow(/the minute range 30-5 runs backwards/);
    // Named, node-cron wraps it round instead: refused alike.
    expect(() => loadConfig({ SCHEDULE_RELEASE: '0 0 * * FRI-MON' }, '/')).toThrow(/the day of week range FRI-MON runs backwards/);
    expect(() => loadConfig({ SCHEDULE_RELEASE: '0 0 1 dec-Jan *' }, '/')).toThrow(/the month range dec-Jan runs backwards/);
    expect(loadConfig({ SCHEDULE_COMPACT: '1-5,10 */2 * * 1-5', SCHEDULE_VERIFY: '*/10 5-30/5 * * * *' }, '/').schedules).toMatchObject({ compact: '1-5,10 */2 * * 1-5', verify: '*/10 5-30/5 * * * *' });
    expect(loadConfig({ SCHEDULE_COMPACT: '0 0 * JAN-DEC SUN-SAT', SCHEDULE_VERIFY: '0 0 * * mon-fri', SCHEDULE_RELEASE: '0 0 * * FRI-SUN' }, '/').schedules).toMatchObject({ compact: '0 0 * JAN-DEC SUN-SAT', verify: '0 0 * * mon-fri', release: '0 0 * * FRI-SUN' });
  });

  it('bounds heavy answers and their temporary files: TMP_DIR, DUCKDB_MAX_TEMP_SIZE, ARCHIVE_MAX_CONCURRENT sized by the memory limit, half of it per address, ARCHIVE_QUEUE_SECONDS, ARCHIVE_MIN_READ_KIB_PER_SECOND', () => {
    const d = loadConfig({}, '/srv/app');
    expect(d.tmpDir).toBe('/srv/app/data/tmp');
    expect(d.duckdbMaxTempSize).toBe('4GB');
    expect(d.heavyAnswers).toEqual({ maxConcurrent: 4, perAddress: 2, maxPages: 8, pagesPerAddress: 4, queueMs: 10_000, minReadBytesPerSecond: 64 * 1024 });
    expect(loadConfig({ DUCKDB_MEMORY_LIMIT: '32MB' }, '/').heavyAnswers.maxConcurrent).toBe(1);
    expect(loadConfig({ DUCKDB_MEMORY_LIMIT: '1GB' }, '/').heavyAnswers.maxConcurrent).toBe(16);
    expect(loadConfig({ DUCKDB_MEMORY_LIMIT: '32MB' }, '/').heavyAnswers.perAddress).toBe(1);
    const c = loadConfig({ TMP_DIR: '/scratch/flood', DUCKDB_MAX_TEMP_SIZE: '20GB', ARCHIVE_MAX_CONCURRENT: '2', ARCHIVE_QUEUE_SECONDS: '0', ARCHIVE_MIN_READ_KIB_PER_SECOND: '0' }, '/srv/app');
    expect([c.tmpDir, c.duckdbMaxTempSize, c.heavyAnswers]).toEqual(['/scratch/flood', '20GB', { maxConcurrent: 2, perAddress: 1, maxPages: 4, pagesPerAddress: 2, queueMs: 0, minReadBytesPerSecond: 0 }]);
    // A share above the whole is the whole.
    expect(loadConfig({ ARCHIVE_MAX_CONCURRENT: '3', ARCHIVE_MAX_CONCURRENT_PER_ADDRESS: '8' }, '/').heavyAnswers).toMatchObject({ maxConcurrent: 3, perAddress: 3 });
    expect(loadConfig({ ARCHIVE_MAX_CONCURRENT_PAGES: '5' }, '/').heavyAnswers).toMatchObject({ maxPages: 5, pagesPerAddress: 2 });
    expect(() => loadConfig({ DUCKDB_MEMORY_LIMIT: '1KB' }, '/')).toThrow(/DUCKDB_MEMORY_LIMIT="1KB": must be at least 1MB/);
    expect(loadConfig({ DUCKDB_MEMORY_LIMIT: '1024KB' }, '/').duckdbMemoryLimit).toBe('1024KB');
    expect(() => loadConfig({ ARCHIVE_MAX_CONCURRENT_PAGES: '0' }, '/')).toThrow(/ARCHIVE_MAX_CONCURRENT_PAGES/);
    for (const [name, value] of [['DUCKDB_MAX_TEMP_SIZE', '4TB'], ['ARCHIVE_MAX_CONCURRENT', '0'], ['ARCHIVE_MAX_CONCURRENT_PER_ADDRESS', '0'], ['ARCHIVE_QUEUE_SECONDS', '-1'], ['ARCHIVE_MIN_READ_KIB_PER_SECOND', 'slow'], ['ARCHIVE_MIN_READ_KIB_PER_SECOND', '-1']]) {
      expect(() => loadConfig({ [name!]: value }, '/')).toThrow(new RegExp(`${name}=`));
    }
  });

  it('re-sends pending reports after RECONCILE_AFTER_SECONDS, four flush intervals (at least 60 s) unless set, never within two', () => {
    expect(loadConfig({}, '/').reconcileAfterSeconds).toBe(120);
    expect(loadConfig({ FLUSH_INTERVAL_SECONDS: '5' }, '/').reconcileAfterSeconds).toBe(60);
    expect(loadConfig({ FLUSH_INTERVAL_SECONDS: '1', RECONCILE_AFTER_SECONDS: '10' }, '/').reconcileAfterSeconds).toBe(10);
    expect(loadConfig({ FLUSH_INTERVAL_SECONDS: '5', RECONCILE_AFTER_SECONDS: '10' }, '/').reconcileAfterSeconds).toBe(10);
    for (const env of [{ FLUSH_INTERVAL_SECONDS: '30', RECONCILE_AFTER_SECONDS: '59' }, { RECONCILE_AFTER_SECONDS: '0' }, { RECONCILE_AFTER_SECONDS: 'soon' }]) {
      expect(() => loadConfig(env, '/'), JSON.stringify(env)).toThrow(/RECONCILE_AFTER_SECONDS=/);
    }
  });

  it('hides a received message for QUEUE_VISIBILITY_SECONDS, two flushes and 30 s unless set, never less than two flushes', () => {
    expect(loadConfig({}, '/').worker.visibilitySeconds).toBe(90);
    expect(loadConfig({ FLUSH_INTERVAL_SECONDS: '1' }, '/').worker.visibilitySeconds).toBe(32);
    expect(loadConfig({ FLUSH_INTERVAL_SECONDS: '1', QUEUE_VISIBILITY_SECONDS: '2' }, '/').worker.visibilitySeconds).toBe(2);
    for (const env of [{ FLUSH_INTERVAL_SECONDS: '30', QUEUE_VISIBILITY_SECONDS: '59' }, { QUEUE_VISIBILITY_SECONDS: '0' }, { QUEUE_VISIBILITY_SECONDS: '1.5' }, { QUEUE_VISIBILITY_SECONDS: '43201' }]) {
      expect(() => loadConfig(env, '/'), JSON.stringify(env)).toThrow(/QUEUE_VISIBILITY_SECONDS=/);
    }
  });

  it('retries a webhook delivery for WEBHOOK_RETRY_HOURS, refused past a day (or half the retention) before the event log drops its events', () => {
    expect(loadConfig({}, '/').events.webhookRetryForMs).toBe(24 * 3_600_000);
    expect(loadConfig({ WEBHOOK_RETRY_HOURS: '144' }, '/').events.webhookRetryForMs).toBe(144 * 3_600_000);
    expect(() => loadConfig({ WEBHOOK_RETRY_HOURS: '150' }, '/')).toThrow(/WEBHOOK_RETRY_HOURS=150: .*EVENTS_RETENTION_HOURS \(168\).*at most 144/);
    expect(() => loadConfig({ WEBHOOK_RETRY_HOURS: '13', EVENTS_RETENTION_HOURS: '24' }, '/')).toThrow(/at most 12$/);
    // The default fits a short retention without a word: nobody asked for 24 hours.
    expect(loadConfig({ EVENTS_RETENTION_HOURS: '24' }, '/').events.webhookRetryForMs).toBe(12 * 3_600_000);
  });

  it('lists every bad variable at once', () => {
    try {
      loadConfig({ PORT: 'x', LOG_LEVEL: 'y' }, '/');
      expect.unreachable();
    } catch (err) {
      expect(String(err)).toMatch(/PORT=/);
      expect(String(err)).toMatch(/LOG_LEVEL=/);
    }
  });
});
