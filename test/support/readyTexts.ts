// Ready texts as tests look into them (src/archive/sidecars/FORMAT.md): every hour's sections
// are gzip members, so a test that changes a stored text, or looks for a report in one, goes
// through their plain bytes.
import { gunzipSync, gzipSync } from 'node:zlib';
import type { ReadyIndex } from '../../src/archive/sidecars/index.js';

const SECTIONS = ['geojson', 'topojson', 'csv', 'arrow'] as const;

function split(stored: Buffer): { index: ReadyIndex; body: Buffer } {
  const eol = stored.indexOf(10);
  return { index: JSON.parse(stored.subarray(0, eol).toString('utf8')) as ReadyIndex, body: stored.subarray(eol + 1) };
}

/** Every hour's sections of a stored ready text, plain, one after another. */
export function plainSections(stored: Buffer): Buffer {
  const { index, body } = split(stored);
  return Buffer.concat(SECTIONS.flatMap((s) => index.hours.map((h) => gunzipSync(body.subarray(h[s][0], h[s][1])))));
}

/**
 * The stored ready text with every hour's plain sections passed through `edit`, which must
 * keep their length (the per-report index says where each item ends).
 */
export function editSections(stored: Buffer, edit: (plain: Buffer) => Buffer): Buffer {
  const { index, body } = split(stored);
  const members: Buffer[] = [];
  let at = 0;
  const hours = index.hours.map((h) => ({ ...h }));
  for (const s of SECTIONS) {
    index.hours.forEach((h, i) => {
      const plain = gunzipSync(body.subarray(h[s][0], h[s][1]));
      const edited = edit(Buffer.from(plain));
      if (edited.length !== plain.length) throw new Error('an edit must keep a section\'s length');
      const member = gzipSync(edited);
      hours[i]![s] = [at, at + member.length];
      members.push(member);
      at += member.length;
    });
  }
  const pad = (8 - (at % 8)) % 8;
  const shift = at + pad - index.items.at;
  const rest = body.subarray(index.items.at);
  const edited: ReadyIndex = { ...index, hours, items: { ...index.items, at: at + pad }, parquet: [index.parquet[0] + shift, index.parquet[1] + shift] };
  return Buffer.concat([Buffer.from(`${JSON.stringify(edited)}\n`), ...members, Buffer.alloc(pad), rest]);
}

/** `editSections` that replaces every occurrence of `from` by `to` (of the same length). */
export function replaceInSections(stored: Buffer, from: string, to: string): Buffer {
  if (Buffer.byteLength(from) !== Buffer.byteLength(to)) throw new Error('a replacement must keep the length');
  return editSections(stored, (plain) => {
    for (let at = plain.indexOf(from); at >= 0; at = plain.indexOf(from, at + 1)) plain.write(to, at);
    return plain;
  });
}
