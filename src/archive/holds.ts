// What an answer is reading in the part cache. A copy is read after it is fetched (a ranged
// copy's hours as a slow client takes them; a window's parts once all are fetched, by one
// query), and the cache's bound would otherwise evict it in between, other answers' copies
// arriving meanwhile. An answer holds the copies of a day until it has sent the day, and those
// a query or count reads until it is done; a hold taken after its answer ended is let go at once.

export class Holds {
  private releases: (() => void)[] = [];
  private ended = false;

  /** Runs `read` with holds of its own, let go when it is done (or fails). */
  static async during<T>(read: (holds: Holds) => Promise<T>): Promise<T> {
    const holds = new Holds();
    try {
      return await read(holds);
    } finally {
      holds.release();
    }
  }

  /** Keeps `release` to call when the answer is done with what it holds. */
  add(release: () => void): void {
    if (this.ended) release();
    else this.releases.push(release);
  }

  /** Lets go of everything held; later holds are let go as they come. */
  release(): void {
    this.ended = true;
    const releases = this.releases;
    this.releases = [];
    for (const release of releases) release();
  }
}
