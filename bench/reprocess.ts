// Reprocess figures: a data dir's whole window re-tagged after each boundary set is published in
// turn, each run a new `reprocess` process (its wall time, its phases and its peak RSS).
import type { Row } from './national.js';
import { cliJson, cliMeasured } from './server.js';

/** A boundary set to publish: its label in the figures and the folder `cities publish` reads. */
export interface BoundaryFolder {
  label: string;
  folder: string;
}

/** Publishes each set in turn and reprocesses the days from `fromMs` to `toMs` after each. */
export async function reprocessRows(dataDir: string, fromMs: number, toMs: number, sets: readonly BoundaryFolder[], env: Record<string, string> = {}): Promise<Row[]> {
  const [from, to] = [fromMs, toMs].map((ms) => new Date(ms).toISOString().slice(0, 10)) as [string, string];
  const rows: Row[] = [];
  for (const { label, folder } of sets) {
    await cliJson(['cities', 'publish', '--from', folder, '--label', `${label} (reprocess benchmark)`], { ...env, DATA_DIR: dataDir });
    const { result: done, seconds, rssMb } = await cliMeasured(['reprocess', '--from', from, '--to', to], { ...env, DATA_DIR: dataDir });
    const phases = done.seconds as unknown as { retagging: number; readyTexts: number };
    rows.push({
      boundaries: label,
      window: `${from} to ${to}`,
      reports: Number(done.reports),
      'hours rewritten': Number(done.hoursRewritten),
      'city changes': Number(done.cityChanges),
      // Hours whose answers did not change: the old parts' ready texts taken as they are.
      'ready texts kept': Number(done.readyTextsKept),
      // Answers carry the new tags once the parts are re-tagged; the ready texts follow.
      're-tagged s': phases.retagging,
      'ready texts s': phases.readyTexts,
      s: Math.round(seconds * 10) / 10,
      'reports/s': Math.round(Number(done.reports) / seconds),
      'peak RSS MB': rssMb,
    });
  }
  return rows;
}
