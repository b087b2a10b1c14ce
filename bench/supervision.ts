// Processes of the compiled CLI kept running as a supervisor (systemd, ECS) keeps them, killed
// with SIGKILL at random moments, and a partner client that retries the same body on any error:
// what the crash and scale-out runs (test/faults, bench:faults) share.
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './server.js';

export interface Supervised {
  name: string;
  child?: ChildProcess;
  /** Whether the current process has started (a crash is a crash of a running process). */
  up: boolean;
  crashes: number;
  /** When the last SIGKILL was sent to it (ms since the epoch; 0: never). */
  lastKillMs: number;
  output: string;
  /** Stops restarting and ends the process. */
  stop(): Promise<void>;
}

/**
 * Runs `flood-archive <command>` and starts it again whenever it dies. `name` tells processes of
 * one command apart; `infoLogs`: the process logs at info level (a worker's "started" line says
 * when it runs, a scheduler's "job finished" lines what it ran).
 */
export function supervise(command: string, env: Record<string, string>, running: Supervised[], options: { name?: string; infoLogs?: boolean } = {}): Supervised {
  let stopping = false;
  const p: Supervised = {
    name: options.name ?? command,
    up: false,
    crashes: 0,
    lastKillMs: 0,
    output: '',
    async stop() {
      stopping = true;
      const child = p.child;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
  const launch = () => {
    const level = options.infoLogs ?? command === 'worker' ? { LOG_LEVEL: 'info' } : {};
    const child = spawn(process.execPath, [CLI, command], { env: { ...env, ...level }, stdio: ['ignore', 'pipe', 'pipe'] });
    p.child = child;
    p.up = false;
    let kept = '';
    const keep = (d: Buffer) => {
      const text = d.toString();
      if (/listening on|"msg":"started"/.test(text)) p.up = true;
      kept += text;
      p.output = kept.slice(-200_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => {
      if (!stopping) setTimeout(launch, 100 + Math.random() * 200);
    });
  };
  launch();
  running.push(p);
  return p;
}

/**
 * SIGKILLs one of the running processes every `everyMs` to 4 × `everyMs` (0.5–2 s by default)
 * until `until` settles.
 */
export async function killAtRandom(targets: Supervised[], until: Promise<unknown>, everyMs = 500): Promise<void> {
  let done = false;
  const settled = until.then(
    () => (done = true),
    () => (done = true),
  );
  while (!done) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((r) => (timer = setTimeout(r, everyMs + Math.random() * 3 * everyMs)))]);
    clearTimeout(timer);
    if (done) break;
    const up = targets.filter((t) => t.up && t.child && t.child.exitCode === null && t.child.signalCode === null);
    const target = up[Math.floor(Math.random() * up.length)];
    if (target) {
      target.up = false;
      target.child!.kill('SIGKILL');
      target.crashes += 1;
      target.lastKillMs = Date.now();
    }
  }
}

/**
 * Posts reports with new post_ids while `more(posted)` says so, each retried with the same body
 * on any error or 5xx, round-robin over `urls` (a retry goes to the next one, as behind a load
 * balancer); returns the post_ids sent and those acknowledged.
 */
export async function postWhile(
  urls: readonly string[],
  apiKey: string,
  more: (posted: number) => boolean,
  bodyOf: (id: number) => unknown,
  concurrency = 8,
): Promise<{ ids: number[]; acked: Set<number> }> {
  const acked = new Set<number>();
  const ids: number[] = [];
  const one = async (id: number) => {
    const body = JSON.stringify(bodyOf(id));
    const giveUpAt = Date.now() + 120_000;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`${urls[(id + attempt) % urls.length]}/feeds/partner`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Api-Key': apiKey },
          body,
          signal: AbortSignal.timeout(10_000),
        });
        await res.arrayBuffer();
        if (res.status === 201 || res.status === 200) {
          acked.add(id);
          return;
        }
        // Only unavailability is retried; anything else is a failure of the test.
        if (res.status !== 503 && res.status !== 502) throw new Error(`post ${id}: unexpected ${res.status}`);
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('post ')) throw err;
      }
      if (Date.now() > giveUpAt) throw new Error(`post ${id}: never acknowledged in 120 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (more(ids.length)) {
        const id = 1_000_000 + ids.length;
        ids.push(id);
        await one(id);
      }
    }),
  );
  return { ids, acked };
}
