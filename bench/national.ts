// The national boundaries against the two-city default: how long the tagger takes per report,
// what /cities weighs and costs, and (with run.ts's ingest scenario) whether ingest keeps its pace.
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { defaultBoundaries } from '../src/boundaries/defaultBoundaries.js';
import { readBoundaryFolder } from '../src/boundaries/folder.js';
import { BoundaryRepository } from '../src/boundaries/repository.js';
import { FileObjectStore } from '../src/store/fileStore.js';
import { Tagger } from '../src/boundaries/tagger.js';
import type { BoundarySet } from '../src/boundaries/types.js';
import { pointPool, prng } from './synthetic.js';

export type Row = Record<string, string | number>;

/** Points inside random barangays of a set, with the code of the city a partner names them by. */
export function postingPoints(set: BoundarySet, n: number, seed = 7): { lng: number; lat: number; city: string }[] {
  return pointPool(set, n, prng(seed));
}

export async function loadSets(sharedNational: string): Promise<{ twoCity: BoundarySet; national: BoundarySet }> {
  return { twoCity: await defaultBoundaries(), national: await readBoundaryFolder(sharedNational, { label: 'PSA/NAMRIA 2023, the Philippines (benchmark)' }) };
}

/** µs per tag: each tagger over points inside its own barangays, and the national one over the two-city points too. */
export function taggingRows(twoCity: BoundarySet, national: BoundarySet, n = 20_000): Row[] {
  const rows: Row[] = [];
  const time = (label: string, tagger: Tagger, points: { lng: number; lat: number }[]) => {
    for (const p of points.slice(0, 1_000)) tagger.tag(p.lng, p.lat); // warm
    const t0 = performance.now();
    let tagged = 0;
    for (const p of points) if (tagger.tag(p.lng, p.lat).local_area_id !== null) tagged += 1;
    rows.push({ boundaries: label, points: points.length, 'µs/tag': Math.round(((performance.now() - t0) * 1000) / points.length * 10) / 10, 'with a barangay': tagged });
  };
  const t0 = performance.now();
  const nationalTagger = new Tagger(national);
  const buildMs = Math.round(performance.now() - t0);
  const twoCityPoints = postingPoints(twoCity, n, 11);
  time('two-city, points in its barangays', new Tagger(twoCity), twoCityPoints);
  time('national, the same points', nationalTagger, twoCityPoints);
  time('national, points in random barangays nationwide', nationalTagger, postingPoints(national, n, 12));
  rows.push({ boundaries: 'national: building the tagger from the set (compact levels and indexes)', points: 0, 'µs/tag': `${buildMs} ms once`, 'with a barangay': '-' });
  return rows;
}

/**
 * Loading a stored version in a process, as a server does at its start and after a publish: the
 * time until it serves, and the longest the event loop was held meanwhile (every request waits
 * that long). `onThreadFromBytes` 0 and Infinity: the parsing on its thread, and in place.
 */
export async function versionLoadRows(sets: readonly { label: string; set: BoundarySet }[], runs = 3): Promise<Row[]> {
  const rows: Row[] = [];
  for (const { label, set } of sets) {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-versions-'));
    try {
      const store = new FileObjectStore(dir);
      const { version } = await new BoundaryRepository(store).publish(set);
      for (const [where, fromBytes] of [['default (large versions on a thread)', undefined], ['in place', Infinity]] as const) {
        const loads: number[] = [];
        const held: number[] = [];
        for (let i = 0; i < runs; i++) {
          // A timer every 5 ms: the longest gap between two of its turns, less the 5 ms.
          let longest = 0;
          let last = performance.now();
          const ticks = setInterval(() => {
            const now = performance.now();
            longest = Math.max(longest, now - last - 5);
            last = now;
          }, 5);
          const t0 = performance.now();
          await new BoundaryRepository(store, 5_000, fromBytes).load(version);
          loads.push(performance.now() - t0);
          // A stall is counted when the timer turns after it.
          await new Promise((resolve) => setTimeout(resolve, 20));
          clearInterval(ticks);
          held.push(longest);
        }
        const median = (xs: number[]) => Math.round(xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
        rows.push({ boundaries: label, parsed: where, 'load ms (median)': median(loads), 'event loop held, longest ms (median)': median(held) });
      }
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }
  return rows;
}

/** GET /cities of the current version (and nationally each level's outlines): bytes as sent and the time of the first (cold) and of later requests. */
export async function citiesRows(url: string, label: string, national = false): Promise<Row[]> {
  // node:http, not fetch: fetch would hand back the body decompressed.
  const get = (query: string, encoding: string) =>
    new Promise<{ ms: number; bytes: number; status: number }>((resolve, reject) => {
      const t0 = performance.now();
      http
        .get(`${url}/cities${query}`, { headers: { 'Accept-Encoding': encoding } }, (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => (bytes += c.length));
          res.on('end', () => resolve({ ms: performance.now() - t0, bytes, status: res.statusCode ?? 0 }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
  const rows: Row[] = [];
  const outlines = national ? (['region', 'province', 'city'] as const).map((level) => [`/outlines?level=${level}`, `outlines, ${level}`] as const) : [];
  for (const [query, name] of [['', 'TopoJSON'], ['?geoformat=geojson', 'GeoJSON'], ...outlines] as const) {
    const cold = await get(query, 'gzip');
    const warm: number[] = [];
    for (let i = 0; i < 5; i++) warm.push((await get(query, 'gzip')).ms);
    const identity = await get(query, 'identity');
    rows.push({ boundaries: label, answer: name, bytes: identity.bytes, 'gzip bytes': cold.bytes, 'cold ms': Math.round(cold.ms), 'warm p50 ms': Math.round(warm.sort((a, b) => a - b)[2]!) });
  }
  return rows;
}
export const SHARED_NATIONAL = (root: string) => path.resolve(root, '..', 'shared', 'data', 'ph-national');
