// Admission of heavy answers (whole archive windows, in any format): at most `max` at once, so
// the ones under way share DuckDB's memory limit and temp space instead of exhausting them
// together, and at most `perClient` of them for one client address, so one client (however
// slowly it reads) cannot hold every turn while others wait. One more waits its turn in a queue
// for at most `queueMs`, then is refused before any byte with Retry-After: a 503 when the
// process is busy, a 429 when only its own address's answers kept it waiting. While one waits,
// an answer that spent most of the last `slowReads.windowMs` waiting on its client, and whose
// client took less than `slowReads.minBytesPerSecond` meanwhile, is cut, and its turn goes to
// the waiter: readers at many addresses, each taking a trickle, would otherwise hold every turn
// for hours (a year at 10 KB/s). An answer slow to make (a Parquet file built before its first
// byte, DuckDB waiting for memory) is not waiting on its client, and is never cut for it.
import { HttpError, OverloadedError } from '../shared/errors.js';

interface Waiter {
  client: string;
  grant: () => void;
}

/** What the admission sees of an answer under way: the bytes its client has taken, how long it has waited on the client, and how to cut it. */
export interface Reader {
  bytesTaken(): number;
  waitedMs(): number;
  cut(): void;
}

/** When a slow reader's turn is taken back (only while another answer waits). */
export interface SlowReads {
  /** 0: never. */
  minBytesPerSecond: number;
  /** The span its rate is measured over; a turn younger than it is kept. */
  windowMs: number;
}

/** A turn held, with its reader's recent byte counts (oldest first, one a sampling). */
interface Holding {
  reader: Reader;
  since: number;
  samples: { atMs: number; bytes: number; waitedMs: number }[];
}

/** Samplings of each reader within a window. */
const SAMPLES_PER_WINDOW = 6;

export class Admission {
  private running = 0;
  /** Turns held, by client. */
  private readonly held = new Map<string, number>();
  private readonly waiting: Waiter[] = [];
  private readonly holdings = new Set<Holding>();
  /** Holdings cut whose answers have not left yet (their close comes a moment later). */
  private readonly cutting = new Set<Holding>();
  private sampler: NodeJS.Timeout | undefined;

  constructor(
    readonly max: number,
    readonly perClient: number,
    private readonly queueMs: number,
    private readonly slowReads: SlowReads = { minBytesPerSecond: 0, windowMs: 60_000 },
    /** What it admits, as its refusals name them. */
    private readonly kind: { plural: string; advice: string } = { plural: 'whole-window answers', advice: 'wait for one to end, or page with limit' },
  ) {}

  /** Answers under way, and waiting for their turn. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /**
   * Waits for a turn for `client`; resolves with the function that gives it back (once, whatever
   * happens). Fails past the queue's wait (OverloadedError, or a 429 if the client's own share
   * was what it waited for), or with `signal`'s reason when the client leaves while waiting.
   */
  async enter(client: string, signal?: AbortSignal, reader?: Reader): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.mayRun(client)) {
      this.take(client);
      return this.leaver(client, reader);
    }
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        client,
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', leave);
          resolve();
        },
      };
      const drop = (err: unknown) => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        clearTimeout(timer);
        signal?.removeEventListener('abort', leave);
        reject(err);
      };
      const leave = () => drop(signal?.reason);
      const timer = setTimeout(() => drop(this.refusal(client)), this.queueMs);
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(waiter);
      this.cutSlowest();
    });
    // The turn was taken for it by the answer that left (dispatch).
    return this.leaver(client, reader);
  }

  private mayRun(client: string): boolean {
    return this.running < this.max && (this.held.get(client) ?? 0) < this.perClient;
  }

  private take(client: string): void {
    this.running += 1;
    this.held.set(client, (this.held.get(client) ?? 0) + 1);
  }

  /** Why a waiter gets no turn: the process is full (503), or only its own share is (429). */
  private refusal(client: string): Error {
    if (this.running < this.max && (this.held.get(client) ?? 0) >= this.perClient) {
      const seconds = String(Math.max(1, Math.ceil(this.queueMs / 1000)));
      return new HttpError(429, `This address already has ${this.perClient} ${this.kind.plural} under way on this server; ${this.kind.advice}.`, [], { 'Retry-After': seconds });
    }
    return new OverloadedError(`The archive is answering ${this.max} ${this.kind.plural} already`);
  }

  private leaver(client: string, reader: Reader | undefined): () => void {
    const holding = reader && this.slowReads.minBytesPerSecond > 0 ? this.hold(reader) : undefined;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      if (holding) {
        this.release(holding);
        this.cutting.delete(holding);
      }
      this.running -= 1;
      const n = (this.held.get(client) ?? 1) - 1;
      if (n > 0) this.held.set(client, n);
      else this.held.delete(client);
      this.dispatch();
    };
  }

  /** Turns to the longest waiting whose clients are under their share: one at its share waits on, not the others behind it. */
  private dispatch(): void {
    for (let i = 0; i < this.waiting.length && this.running < this.max; ) {
      const waiter = this.waiting[i]!;
      if (!this.mayRun(waiter.client)) {
        i += 1;
        continue;
      }
      this.waiting.splice(i, 1);
      this.take(waiter.client);
      waiter.grant();
    }
  }

  private hold(reader: Reader): Holding {
    const now = performance.now();
    const holding = { reader, since: now, samples: [{ atMs: now, bytes: reader.bytesTaken(), waitedMs: reader.waitedMs() }] };
    this.holdings.add(holding);
    this.sampler ??= setInterval(() => this.sample(), this.slowReads.windowMs / SAMPLES_PER_WINDOW).unref();
    return holding;
  }

  private release(holding: Holding): void {
    this.holdings.delete(holding);
    if (this.holdings.size > 0) return;
    clearInterval(this.sampler);
    this.sampler = undefined;
  }

  /** Each reader's bytes now, a window's worth kept; a slow one cut if an answer waits. */
  private sample(): void {
    const now = performance.now();
    for (const h of this.holdings) {
      h.samples.push({ atMs: now, bytes: h.reader.bytesTaken(), waitedMs: h.reader.waitedMs() });
      if (h.samples.length > SAMPLES_PER_WINDOW + 1) h.samples.shift();
    }
    this.cutSlowest();
  }

  /**
   * When every turn is held and an answer that could take one waits: the slowest reader below
   * the floor over the last window is cut (one for each such waiter, counting those cut that
   * have not left yet; its leaving gives the turn on).
   */
  private cutSlowest(): void {
    const waiters = this.waiting.filter((w) => (this.held.get(w.client) ?? 0) < this.perClient).length;
    if (this.running < this.max || waiters <= this.cutting.size) return;
    const now = performance.now();
    let slowest: { holding: Holding; rate: number } | undefined;
    for (const h of this.holdings) {
      if (now - h.since < this.slowReads.windowMs) continue;
      // The oldest sample kept: about a window ago (its first, at its turn's start, until then).
      const from = h.samples[0]!;
      const span = Math.max(1, now - from.atMs);
      // Mostly waiting on its client meanwhile: the client, not the answer, is what is slow.
      if (h.reader.waitedMs() - from.waitedMs < span / 2) continue;
      const rate = ((h.reader.bytesTaken() - from.bytes) * 1000) / span;
      if (rate < this.slowReads.minBytesPerSecond && (!slowest || rate < slowest.rate)) slowest = { holding: h, rate };
    }
    if (!slowest) return;
    // Out of the running at once: the cut's leaving may come later (its close event).
    this.holdings.delete(slowest.holding);
    this.cutting.add(slowest.holding);
    slowest.holding.reader.cut();
  }
}
