// Which cities' barangays the national map keeps drawn. Each drawn barangay holds its outline and
// its SVG path (some 6 KB of the page's memory): a long visit zoomed in over the country would
// otherwise keep every one it passed (hundreds of MB after a few hundred views, too much for a
// phone). Beyond a limit, the cities seen longest ago are dropped, and fetched again if seen again.

/** The cities whose barangays are drawn, the one seen longest ago first, and how many each drew. */
export class KeptAreas {
  /** `limit`: the barangays kept at most, those in view counted, though a city in view is never dropped. */
  constructor(limit) {
    this.limit = limit;
    /** city code → the barangays drawn for it (anything: the caller's layers); in the order last seen. */
    this.byCity = new Map();
    this.size = 0;
  }

  /** Keeps `areas` as the barangays drawn for `city`, seen now. */
  add(city, areas) {
    this.forget(city);
    this.byCity.set(city, areas);
    this.size += areas.length;
  }

  /** These cities are in view now: the last to be dropped. */
  seen(cities) {
    for (const city of cities) {
      const areas = this.byCity.get(city);
      if (areas === undefined) continue;
      this.byCity.delete(city);
      this.byCity.set(city, areas);
    }
  }

  /**
   * Takes out the cities seen longest ago until at most `limit` barangays are kept, never one of
   * `inView`; returns them, each with its barangays, for the caller to take off the map.
   */
  dropBeyondLimit(inView) {
    const dropped = [];
    for (const [city, areas] of this.byCity) {
      if (this.size <= this.limit) break;
      if (inView.has(city)) continue;
      this.forget(city);
      dropped.push({ city, areas });
    }
    return dropped;
  }

  forget(city) {
    const areas = this.byCity.get(city);
    if (areas === undefined) return;
    this.byCity.delete(city);
    this.size -= areas.length;
  }
}

/**
 * Barangays kept drawn at most (those in view counted, and never dropped), for a device with this much memory in GB
 * (`navigator.deviceMemory`, which Chromium-based browsers give, rounded and at most 8): some
 * 2,500 a GB (15 MB of the page's), 10,000 where the browser does not say.
 */
export function areasKeptFor(deviceMemoryGb) {
  return Math.max(1_000, Math.round((deviceMemoryGb ?? 4) * 2_500));
}
