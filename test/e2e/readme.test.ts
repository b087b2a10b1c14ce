// The README's walk-through, run as a newcomer pastes it: its shell blocks taken from the README
// itself, against the service started as `npm start` starts it (no API_KEYS, DATA_DIR the
// default ./data in a fresh directory). Every command must succeed (curl fails on any 4xx or 5xx
// here) and print what the README's `# …` comment after it shows, `…` standing for anything.
// Only what makes it run here changes: the port, the flush wait, and `npm run cli --` as the
// built CLI it runs (npm would build again).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { asServer, CLI, type Server } from '../../bench/server.js';
import { tempDir } from '../support/env.js';

const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../README.md');
const HAS_CURL = (() => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

interface Step {
  command: string;
  /** The output the README shows for it, `…` for anything. */
  shows?: string;
}

/** The commands of the sh blocks between two headings, each with the output its comment shows. */
function walkThrough(markdown: string, from: string, to: string): Step[] {
  const section = markdown.slice(markdown.indexOf(from), markdown.indexOf(to));
  const steps: Step[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.split('\n')) {
      if (line.trim() === '') continue;
      if (line.startsWith('# ')) {
        // Comment lines one after another show the lines of one output.
        const last = steps.at(-1)!;
        last.shows = last.shows === undefined ? line.slice(2) : `${last.shows}\n${line.slice(2)}`;
      } else if (/^[a-z]/i.test(line) && !isContinued(steps.at(-1)?.command)) {
        // A trailing comment on the command's own line shows its output too.
        const inline = /\s+# (\{.*)$/.exec(line);
        steps.push({ command: inline ? line.slice(0, inline.index) : line, ...(inline && { shows: inline[1] }) });
      } else {
        steps.at(-1)!.command += `\n${line}`;
      }
    }
  }
  return steps;
}

/** A command that goes on to the next line: a trailing backslash, or a quote still open. */
function isContinued(command: string | undefined): boolean {
  if (command === undefined) return false;
  if (command.endsWith('\\')) return true;
  return (command.replace(/"[^"]*"/g, '').match(/'/g)?.length ?? 0) % 2 === 1;
}

function pattern(shown: string): RegExp {
  return new RegExp(`^${shown.split('…').map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*')}$`);
}

describe.skipIf(!HAS_CURL)('the README walk-through', () => {
  let dir: string;
  let server: Server;
  beforeAll(async () => {
    dir = await tempDir('flood-readme-');
    const child = spawn(process.execPath, [CLI, 'all'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', TZ: 'UTC', PORT: '0', FLUSH_INTERVAL_SECONDS: '1', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    server = await asServer(child);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('runs as written, each command printing what the README shows', async () => {
    const steps = walkThrough(await fs.readFile(README, 'utf8'), '## A walk-through with curl', '## The explorer');
    // The walk-through as the README has it: posts, a read, the sizes, stats, a retraction, a release.
    expect(steps.length).toBeGreaterThanOrEqual(12);
    expect(steps.filter((s) => s.shows !== undefined).length).toBeGreaterThanOrEqual(5);
    const here = (command: string) =>
      command
        .replaceAll('http://localhost:8080', server.url)
        .replace(/^sleep 35$/, 'sleep 3')
        .replaceAll('npm run cli --', `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)}`);
    const script = [
      // curl fails on an error status, so a 4xx or 5xx stops the walk-through as a failure.
      'curl() { command curl --fail-with-body "$@"; }',
      ...steps.flatMap((s, i) => [`printf '\\n@@@ %d\\n' ${i}`, here(s.command), `printf '\\n@@@ rc %d %d\\n' ${i} $?`]),
    ].join('\n');
    const out = await new Promise<string>((resolve, reject) => {
      const sh = spawn('bash', ['-c', script], { cwd: dir, env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      sh.stdout.on('data', (d) => (text += d));
      sh.on('error', reject);
      sh.on('close', () => resolve(text));
    });
    for (const [i, step] of steps.entries()) {
      const m = new RegExp(`\\n@@@ ${i}\\n([\\s\\S]*?)\\n@@@ rc ${i} (\\d+)\\n`).exec(out);
      expect(m, `no output for: ${step.command}`).not.toBeNull();
      expect([step.command, Number(m![2])], m![1]).toEqual([step.command, 0]);
      if (step.shows !== undefined) expect(m![1]!.trim(), step.command).toMatch(pattern(here(step.shows)));
    }
    // The files the bulk pulls wrote are the formats they name.
    const parquet = await fs.readFile(path.join(dir, 'year.parquet'));
    expect([parquet.subarray(0, 4).toString(), parquet.subarray(-4).toString()]).toEqual(['PAR1', 'PAR1']);
    expect((await fs.readFile(path.join(dir, 'year.csv'), 'utf8')).split('\n').filter(Boolean)).toHaveLength(3);
  });
});
