// Arrow and Parquet answers of a window share one schema: the same columns, in the same order,
// with the same types, as pyarrow reads them (the researchers' common reader of both).
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allArchived, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const run = promisify(execFile);
const HAS_PYARROW = await run('python3', ['-c', 'import pyarrow']).then(() => true, () => false);
if (!HAS_PYARROW) console.warn('skipped: python3 with pyarrow is absent (pip install pyarrow)');
const WINDOW = 'start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';

const SCHEMAS = `
import sys, json, pyarrow as pa, pyarrow.parquet as pq
def describe(schema):
    return [[f.name, str(f.type), f.nullable] for f in schema]
parquet = pq.read_table(sys.argv[1])
with pa.ipc.open_stream(sys.argv[2]) as reader:
    arrow = reader.read_all()
print(json.dumps({"parquet": describe(parquet.schema), "arrow": describe(arrow.schema),
                  "equal": parquet.equals(arrow)}))
`;

describe.skipIf(!HAS_PYARROW)('Arrow and Parquet answers', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')));
    for (const id of [1, 2, 3]) {
      // Multi-byte text and nulls beside values: the string columns' bytes, offsets and validity.
      const res = await postReport(
        svc.url,
        report(id, { created_at: `2026-11-21T0${id}:15:30.123Z`, title: `t${id} Parañaque 🌊`, text: id === 3 ? '' : `baha "${id}"\nsa daan`, ...(id === 2 && { image_url: 'https://example.org/a.jpg' }) }),
      );
      expect(res.status).toBe(201);
    }
    await allArchived(svc.rt);
  });
  afterAll(async () => svc?.stop());

  it('have one schema and the same rows, as pyarrow reads them', async () => {
    const dir = await tempDir();
    const files: Record<string, string> = {};
    for (const format of ['parquet', 'arrow']) {
      const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=${format}`, { headers: { 'User-Agent': 'schema-tests/1.0' } });
      expect(res.status).toBe(200);
      files[format] = path.join(dir, `answer.${format}`);
      await fs.writeFile(files[format], Buffer.from(await res.arrayBuffer()));
    }
    const { stdout } = await run('python3', ['-c', SCHEMAS, files.parquet!, files.arrow!]);
    const got = JSON.parse(stdout);
    expect(got.arrow.map((f: unknown[]) => f.slice(0, 2))).toEqual(got.parquet.map((f: unknown[]) => f.slice(0, 2)));
    expect(got.parquet.find((f: unknown[]) => f[0] === 'created_at')[1]).toBe('timestamp[us, tz=UTC]');
    expect(got.equal).toBe(true);
  });
});
