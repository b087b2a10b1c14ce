// A power loss: what survives is what was flushed. An import resumes from its checkpoint, so a
// checkpoint must be on disk when it replaces the last one, and every file it names (validated,
// sorted, staged, part copies; the rejects it counts) must be on disk, with the run folder's
// entries, before it is written. An export the command called done must be whole under its name.
// The commands run under strace, and the trace of their file calls (a checkpoint's bytes as
// written) is checked against those rules.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI } from '../support/cli.js';
import { HAS_STRACE, STRACE_MISSING } from '../support/clients.js';
import { importFile } from '../../src/ops/importFile.js';
import { failAfterPuts } from '../support/faultyStore.js';
import { stoppedAfterSecondAcceptance } from '../support/importFaults.js';
import { report, startTestService, tempDir, testConfig, testRuntime } from '../support/env.js';

/** A completed file call of the trace, in the order the calls returned. */
interface Call {
  name: string;
  args: string;
  result: string;
}

/** The calls of `strace -f -y` output, each thread's unfinished calls joined with their resumption. */
function callsOf(trace: string): Call[] {
  const calls: Call[] = [];
  const unfinished = new Map<string, string>();
  for (const line of trace.split('\n')) {
    const m = /^(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, tid, rest] = m as unknown as [string, string, string];
    let text = rest;
    if (text.endsWith('<unfinished ...>')) {
      unfinished.set(tid, text.slice(0, -'<unfinished ...>'.length));
      continue;
    }
    const resumed = /^<\.\.\. \w+ resumed>(.*)$/.exec(text);
    if (resumed) {
      text = (unfinished.get(tid) ?? '') + resumed[1];
      unfinished.delete(tid);
    }
    const call = /^(\w+)\((.*)\)\s+=\s+(.*)$/s.exec(text);
    if (call) calls.push({ name: call[1]!, args: call[2]!, result: call[3]! });
  }
  return calls;
}

/** The path strace -y gives a descriptor argument or result: `25</a/b>`. */
const fdPath = (text: string) => /^-?\d+<(.*?)>/.exec(text.trim())?.[1];

/** A string argument as strace prints it (C escapes), as its text. */
function unescape(quoted: string): string {
  return quoted.replace(/\\(x[0-9a-f]{2}|[0-7]{1,3}|.)/g, (_, e: string) => {
    if (e[0] === 'x') return String.fromCharCode(parseInt(e.slice(1), 16));
    if (/^[0-7]+$/.test(e)) return String.fromCharCode(parseInt(e, 8));
    return ({ n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' } as Record<string, string>)[e] ?? e;
  });
}

/** The paths a call names (a rename: from, to; a mkdir: the folder): its first two strings. */
const pathsOf = (args: string) => [...args.matchAll(/"((?:[^"\\]|\\.)*)"/g)].slice(0, 2).map((m) => unescape(m[1]!));

/** The CLI under strace: its output, and its file calls (writes with their bytes: a checkpoint is a few KB; longer writes, DuckDB's, cut short). */
async function traced(args: string[], dataDir: string, traceFile: string): Promise<{ code: number; stdout: string; stderr: string; calls: Call[] }> {
  const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'strace',
      ['-f', '-qq', '-y', '-s', '262144', '-e', 'trace=openat,mkdir,mkdirat,rename,renameat,renameat2,fsync,fdatasync,write', '-o', traceFile, process.execPath, CLI, ...args, '--json'],
      { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'silent', DATA_DIR: dataDir }, maxBuffer: 1 << 24 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  return { ...out, calls: callsOf(await fs.readFile(traceFile, 'utf8')) };
}

/** When each file was made (created, truncated or renamed into place; a folder: created) and flushed, in the calls' order. */
function timeline(calls: readonly Call[]) {
  const flushed: { path: string; at: number }[] = [];
  const made = new Map<string, { at: number; from?: string }[]>();
  const renames: { at: number; from: string; to: string }[] = [];
  calls.forEach((call, at) => {
    if (call.name === 'fsync' || call.name === 'fdatasync') {
      const p = fdPath(call.args);
      if (p && call.result.startsWith('0')) flushed.push({ path: p, at });
    } else if (call.name === 'openat' && /O_CREAT|O_TRUNC/.test(call.args) && !/O_APPEND/.test(call.args)) {
      // (An append, which may create the file, makes nothing new of a file that is there.)
      const p = fdPath(call.result);
      if (p) made.set(p, [...(made.get(p) ?? []), { at }]);
    } else if (call.name.startsWith('mkdir') && call.result.startsWith('0')) {
      const [p] = pathsOf(call.args);
      if (p !== undefined) made.set(p, [...(made.get(p) ?? []), { at }]);
    } else if (call.name.startsWith('rename') && call.result.startsWith('0')) {
      const [from, to] = pathsOf(call.args);
      if (from === undefined || to === undefined) return;
      made.set(to, [...(made.get(to) ?? []), { at, from }]);
      renames.push({ at, from, to });
    }
  });
  /** The last making of `p` before `at`. */
  const madeBefore = (p: string, at: number) => made.get(p)?.filter((m) => m.at < at).pop();
  const flushedBetween = (p: string, from: number, to: number) => flushed.some((f) => f.path === p && f.at > from && f.at < to);
  /** Whether `p` is on disk by `at`: flushed since it was last made, or flushed under its old name before it was renamed to it. */
  const durableBy = (p: string, at: number): boolean => {
    const m = madeBefore(p, at);
    if (!m) return false;
    if (flushedBetween(p, m.at, at)) return true;
    return m.from !== undefined && flushedBetween(m.from, madeBefore(m.from, m.at)?.at ?? -1, m.at);
  };
  return { renames, madeBefore, flushedBetween, durableBy };
}

interface Named {
  validated: string[];
  sorted?: string;
  staged: string[];
  untexted: { file: string }[];
  run: string;
  rejectsBytes?: number;
}

/** What an import's trace shows of its checkpoints (see `checkpointsAreDurable`). */
interface CheckedRun {
  /** Each file a checkpoint named that the traced run made, checked, by its name. */
  checked: Set<string>;
  /** The checkpoints that counted rejects, the rejects checked. */
  counted: number;
  /** The checkpoints naming a run folder the traced run made, its name in its parent checked. */
  runNamed: number;
}

/**
 * Checks an import's trace: every file a checkpoint names that the traced run made (a run
 * resumed names files an earlier one made too) is flushed before the checkpoint's bytes are
 * written, its name in the run folder before the checkpoint stands, the run folder's own name
 * in its parent; the rejects it counts are flushed; each checkpoint is flushed before it
 * replaces the last one and its folder after.
 */
function checkpointsAreDurable(calls: readonly Call[], dataDir: string, file: string): CheckedRun {
  const stateFile = `${file}.import-state.json`;
  const rejectsFile = `${file}.rejected.ndjson`;
  const { renames, madeBefore, flushedBetween, durableBy } = timeline(calls);
  const rejectsWrites: number[] = [];
  const checkpoints: { at: number; tmp: string; named: Named }[] = [];
  const stateRenames = renames.filter((r) => r.to === stateFile).map((r) => ({ at: r.at, tmp: r.from }));
  calls.forEach((call, at) => {
    if (call.name !== 'write') return;
    const p = fdPath(call.args);
    if (p === rejectsFile) rejectsWrites.push(at);
    if (p?.startsWith(`${stateFile}.`)) {
      const text = /^\d+<[^>]*>,\s*"((?:[^"\\]|\\.)*)"/.exec(call.args)?.[1];
      checkpoints.push({ at, tmp: p, named: JSON.parse(unescape(text!)) as Named });
    }
  });

  expect(checkpoints.length).toBeGreaterThan(0);
  const checked = new Set<string>();
  let counted = 0;
  let runNamed = 0;
  for (const { at, named } of checkpoints) {
    // Where this checkpoint takes the checkpoint's name: what it names must be on disk by then.
    const standsAt = stateRenames.find((r) => r.at > at)!.at;
    const runDir = path.join(dataDir, 'tmp', 'import', named.run);
    // The run folder's own name, in its parent, before a checkpoint names the run (made by this run).
    const runMade = madeBefore(runDir, at);
    if (runMade) {
      expect(flushedBetween(path.dirname(runDir), runMade.at, standsAt), "the run folder's name flushed before a checkpoint names the run").toBe(true);
      runNamed += 1;
    }
    const files = [...named.validated, ...(named.sorted ? [named.sorted] : []), ...named.staged, ...named.untexted.map((p) => p.file)].map((name) => path.join(runDir, name));
    for (const f of files) {
      const made = madeBefore(f, at);
      // Made by the run this one resumed: its flushes are that run's.
      if (!made) continue;
      // Each file whole on disk before the checkpoint's bytes are written, and its name in the run folder before the checkpoint stands.
      expect(durableBy(f, at), `${path.basename(f)} flushed before a checkpoint names it`).toBe(true);
      expect(flushedBetween(runDir, made.at, standsAt), `the run folder flushed after ${path.basename(f)} was made, before a checkpoint naming it stands`).toBe(true);
      checked.add(path.basename(f));
    }
    // The rejects it counts, flushed after the last of them was written.
    const lastRejects = rejectsWrites.filter((w) => w < at).pop();
    if ((named.rejectsBytes ?? 0) > 0 && lastRejects !== undefined) {
      expect(flushedBetween(rejectsFile, lastRejects, at), 'the rejects flushed before the checkpoint that counts them').toBe(true);
      // And the rejects file's name, in the folder beside the input.
      expect(flushedBetween(path.dirname(rejectsFile), madeBefore(rejectsFile, at)!.at, at), "the rejects file's folder flushed after it was made").toBe(true);
      counted += 1;
    }
  }
  // Each checkpoint flushed before it takes the checkpoint's name, and that name flushed into its folder after.
  expect(stateRenames.length).toBe(checkpoints.length);
  stateRenames.forEach(({ at, tmp }, i) => {
    expect(durableBy(tmp, at), 'a checkpoint flushed before it replaces the last one').toBe(true);
    const next = stateRenames[i + 1]?.at ?? calls.length;
    expect(flushedBetween(path.dirname(stateFile), at, next), 'the checkpoint folder flushed after the rename').toBe(true);
  });
  return { checked, counted, runNamed };
}

/** `n` reports from `firstId` over June 2026's hours, in no order of time. */
function juneLines(firstId: number, n: number): string[] {
  const start = Date.UTC(2026, 5, 1);
  return Array.from({ length: n }, (_, i) => JSON.stringify(report(firstId + i, { created_at: new Date(start + (((firstId + i) * 7_919) % (30 * 24)) * 3_600_000).toISOString() })));
}

describe.skipIf(!HAS_STRACE)('what an ops command calls done survives a power loss', () => {
  it('an import flushes every file a checkpoint names, and the run folder, before the checkpoint, and the checkpoint before it stands', async () => {
    const dir = await tempDir('flood-import-durable-');
    const dataDir = path.join(dir, 'data');
    const file = path.join(dir, 'backfill.ndjson');
    // Three batches of records over a month, and rejects among them.
    const lines = juneLines(1, 24_000);
    for (const at of [5, 12_345, 23_000]) lines[at] = '{"post_id": "not a number"';
    await fs.writeFile(file, `${lines.join('\n')}\n`);
    const { calls, ...out } = await traced(['import', '--file', file], dataDir, path.join(dir, 'trace.txt'));
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ records: 24_000, accepted: 23_997, rejected: 3 });

    const { checked, counted, runNamed } = checkpointsAreDurable(calls, dataDir, file);
    // The run made its working files, and checkpoints named them.
    expect([...new Set([...checked].map((f) => f.replace(/[-.].*$/, '')))].sort()).toEqual(['sorted', 'stage', 'texts', 'valid']);
    expect(checked.size).toBeGreaterThan(10);
    expect(counted).toBeGreaterThan(0);
    expect(runNamed).toBeGreaterThan(5);
  });

  it('an import resumed flushes what it makes again: the held repeats it stages, the sorted file of a release before rewritten, a stored part fetched back', async () => {
    const dir = await tempDir('flood-import-resumed-');
    const held = path.join(dir, 'held.ndjson');
    const swept = path.join(dir, 'swept.ndjson');
    await fs.writeFile(held, juneLines(100_000, 3_000).join('\n'));
    await fs.writeFile(swept, juneLines(200_000, 3_000).join('\n'));
    // No worker and no reconciliation: what reaches the archive, the import put there.
    const svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    const { rt } = svc;
    const dataDir = rt.config.dataDir;
    let sweptCopy: string;
    try {
      // Stopped once the ledger committed its second batch, before staging it, by the release
      // before (a version 3 checkpoint, a sorted file of (n, record)): the resumed run finds that
      // batch held for it, and rewrites the sorted file with each record's post_id.
      await expect(importFile(stoppedAfterSecondAcceptance(rt), { file: held, batchSize: 1_000 })).rejects.toThrow(/killed/);
      const heldState = `${held}.import-state.json`;
      const state = JSON.parse(await fs.readFile(heldState, 'utf8'));
      const sorted = path.join(dataDir, 'tmp', 'import', state.run, state.sorted);
      await rt.db.withConnection((conn) => conn.run(`COPY (SELECT n, record FROM read_parquet('${sorted}')) TO '${sorted}.old' (FORMAT parquet)`));
      await fs.rename(`${sorted}.old`, sorted);
      await fs.writeFile(heldState, JSON.stringify({ ...state, v: 3 }));

      // Stopped while storing parts, and one stored part's local copy swept since: fetched back.
      await expect(importFile({ ...rt, store: failAfterPuts(rt.store, 'reports/v1/', 5) }, { file: swept, batchSize: 1_000 })).rejects.toThrow(/simulated crash/);
      const sweptState = JSON.parse(await fs.readFile(`${swept}.import-state.json`, 'utf8')) as { run: string; roundFrom: number; untexted: { file: string; stored?: boolean }[] };
      sweptCopy = sweptState.untexted.slice(sweptState.roundFrom).find((p) => p.stored)!.file;
      await fs.rm(path.join(dataDir, 'tmp', 'import', sweptState.run, sweptCopy));
    } finally {
      await svc.stop();
    }

    const heldRun = await traced(['import', '--file', held], dataDir, path.join(dir, 'held-trace.txt'));
    expect(heldRun.stderr).toBe('');
    expect(JSON.parse(heldRun.stdout)).toMatchObject({ records: 3_000, accepted: 3_000, resumedFrom: 3_000 });
    const fromHeld = checkpointsAreDurable(heldRun.calls, dataDir, held);
    expect([...fromHeld.checked].filter((f) => f.endsWith('-held.parquet')), 'the held repeats staged, and checked').toHaveLength(1);
    expect(fromHeld.checked.has('sorted.parquet'), 'the sorted file rewritten, and checked').toBe(true);

    const sweptRun = await traced(['import', '--file', swept], dataDir, path.join(dir, 'swept-trace.txt'));
    expect(sweptRun.stderr).toBe('');
    expect(JSON.parse(sweptRun.stdout)).toMatchObject({ records: 3_000, accepted: 3_000, resumedFrom: 3_000 });
    expect(checkpointsAreDurable(sweptRun.calls, dataDir, swept).checked.has(sweptCopy), 'the part fetched back, and checked').toBe(true);
  });

  it('flushes an export before it takes its name, and the name after, in every format', async () => {
    const dir = await tempDir('flood-export-durable-');
    const dataDir = path.join(dir, 'data');
    const file = path.join(dir, 'june.ndjson');
    const start = Date.UTC(2026, 5, 1);
    await fs.writeFile(file, Array.from({ length: 500 }, (_, i) => JSON.stringify(report(i + 1, { created_at: new Date(start + i * 3_600_000).toISOString() }))).join('\n'));
    const imported = await traced(['import', '--file', file], dataDir, path.join(dir, 'import-trace.txt'));
    expect(imported.code).toBe(0);
    for (const format of ['csv', 'geojson', 'parquet']) {
      const out = path.join(dir, `june.${format}`);
      const { calls, ...run } = await traced(['export', '--from', '2026-06-01', '--to', '2026-06-30', '--format', format, '--out', out], dataDir, path.join(dir, `${format}-trace.txt`));
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect((await fs.stat(out)).size).toBeGreaterThan(10_000);
      const { renames, flushedBetween, durableBy } = timeline(calls);
      const into = renames.filter((r) => r.to === out);
      expect(into, `one rename of the ${format} export into place`).toHaveLength(1);
      const { at } = into[0]!;
      expect(durableBy(out, at + 1), `the ${format} export flushed before it takes its name`).toBe(true);
      expect(flushedBetween(dir, at, calls.length), `the ${format} export's folder flushed after the rename`).toBe(true);
    }
  });
});

if (!HAS_STRACE) console.warn(STRACE_MISSING);
