// The national map keeps the barangays of the cities seen most recently, up to a limit
// (web/keptAreas.js, plain JavaScript for the page): a long visit stays within a phone's memory.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

interface Dropped {
  city: string;
  areas: string[];
}
interface KeptAreasClass {
  new (limit: number): { size: number; add(city: string, areas: string[]): void; seen(cities: string[]): void; dropBeyondLimit(inView: Set<string>): Dropped[] };
}

const MODULE = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/keptAreas.js')).href;
const areas = (city: string, n: number) => Array.from({ length: n }, (_, i) => `${city}-${i}`);

describe("the explorer's kept barangays", () => {
  it('drop the cities seen longest ago beyond the limit, never one in view, and count what is kept', async () => {
    const { KeptAreas } = (await import(MODULE)) as { KeptAreas: KeptAreasClass };
    const kept = new KeptAreas(100);
    kept.add('A', areas('A', 40));
    kept.add('B', areas('B', 30));
    kept.add('C', areas('C', 20));
    // Within the limit: nothing goes.
    expect(kept.dropBeyondLimit(new Set())).toEqual([]);
    expect(kept.size).toBe(90);
    // A seen again is now the newest; D takes the count past the limit: B, seen longest ago, goes.
    kept.seen(['A']);
    kept.add('D', areas('D', 25));
    expect(kept.dropBeyondLimit(new Set(['D']))).toEqual([{ city: 'B', areas: areas('B', 30) }]);
    expect(kept.size).toBe(85);
    // Cities in view stay whatever their age, even past the limit: those out of view go first.
    kept.add('E', areas('E', 60));
    expect(kept.dropBeyondLimit(new Set(['C', 'E'])).map((d) => d.city)).toEqual(['A', 'D']);
    expect(kept.size).toBe(80);
    kept.add('F', areas('F', 50));
    expect(kept.dropBeyondLimit(new Set(['C', 'E', 'F']))).toEqual([]);
    expect(kept.size).toBe(130);
    // A city drawn again (its barangays fetched again) counts once.
    kept.add('C', areas('C', 20));
    expect(kept.size).toBe(130);
    expect(kept.dropBeyondLimit(new Set(['F'])).map((d) => d.city)).toEqual(['E']);
    expect(kept.size).toBe(70);
  });
});
