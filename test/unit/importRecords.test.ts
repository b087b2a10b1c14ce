// An import file's records: a CSV file that cannot be read fails the import's reading with the
// system's error, where it used to be an 'error' event nobody listened to, which stops the process.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { records } from '../../src/ops/importRecords.js';
import { tempDir } from '../support/env.js';

describe("an import file's records", () => {
  it('reads a CSV file row by row, and fails the reading (not the process) when the file cannot be read', async () => {
    const dir = await tempDir('flood-records-');
    const file = path.join(dir, 'rows.csv');
    await fs.writeFile(file, 'post_id,title,lat,lng\n1,Baha,14.6,121\n2,Flood,15,120.7\n');
    const rows: unknown[] = [];
    for await (const row of records(file, 'csv')) rows.push(row);
    expect(rows).toEqual([
      { post_id: '1', title: 'Baha', lat: '14.6', lng: '121' },
      { post_id: '2', title: 'Flood', lat: '15', lng: '120.7' },
    ]);
    // A directory where the file should be: reading it fails with EISDIR.
    const unreadable = path.join(dir, 'folder.csv');
    await fs.mkdir(unreadable);
    const read = async () => {
      for await (const row of records(unreadable, 'csv')) void row;
    };
    await expect(read()).rejects.toMatchObject({ code: 'EISDIR' });
  });
});
