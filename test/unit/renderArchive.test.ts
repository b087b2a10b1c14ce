// The archive's text answers from runs of ready-text items: a run that reads empty (its sidecar
// rewritten by a purge since the window was planned, the hour or its reports gone) leaves no
// separator behind, so the answer stays well formed in every text format.
import { describe, expect, it } from 'vitest';
import { renderArchive, separatorOf, type TextFormat } from '../../src/http/archiveBody.js';
import type { FeatureBatch, Run } from '../../src/archive/render.js';

const feature = (n: number) => JSON.stringify({ type: 'Feature', geometry: { type: 'Point', coordinates: [121, 14.6] }, properties: { pkey: `partner-${n}` } });

async function text(format: TextFormat, items: (string | null)[][]): Promise<string> {
  const sep = separatorOf(format);
  // Each run a read: its items joined by the separator, or nothing (read empty).
  const runs: Run[] = items.map((run) => () => (run.every((i) => i === null) ? [new Uint8Array(0)] : [Buffer.from(run.filter((i) => i !== null).join(sep))]));
  async function* batches(): AsyncIterable<FeatureBatch> {
    yield { items: runs.slice(0, 2), bbox: undefined, keys: undefined };
    yield { items: runs.slice(2), bbox: undefined, keys: undefined };
  }
  let out = '';
  for await (const piece of renderArchive(batches(), format)) out += typeof piece === 'string' ? piece : Buffer.from(piece as Uint8Array).toString();
  return out;
}

describe('archive text from ready-text runs', () => {
  const runs = [[feature(1)], [null], [null], [feature(2), feature(3)], [null]];

  it('GeoJSON: a run read empty leaves no comma; the first run empty, none either', async () => {
    const body = JSON.parse(await text('geojson', runs));
    expect(body.result.features.map((f: any) => f.properties.pkey)).toEqual(['partner-1', 'partner-2', 'partner-3']);
    expect(JSON.parse(await text('geojson', [[null], [feature(4)]])).result.features).toHaveLength(1);
    expect(JSON.parse(await text('geojson', [[null], [null]])).result.features).toEqual([]);
  });

  it('NDJSON and CSV: no blank line for a run read empty', async () => {
    expect((await text('ndjson', runs)).split('\n')).toEqual([feature(1), feature(2), feature(3), '']);
    const csv = (await text('csv', [['"a",1'], [null], ['"b",2']])).split('\n');
    expect(csv.slice(1)).toEqual(['"a",1', '"b",2', '']);
  });
});
