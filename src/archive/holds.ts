// What an answer is reading in the part cache. A ranged copy is read well after it is fetched
// (a day's hours as a slow client takes them), and the cache's bound would otherwise evict it
// in between, other answers' copies arriving meanwhile. An answer holds the copies of a day
// until it has sent the day; a hold taken after its answer ended is let go at once.

export class Holds {
  private releases: (() => void)[] = [];
  private ended = false;

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
