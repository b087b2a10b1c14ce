// The README and docs/ link to each other's sections: a heading renamed or a file moved leaves a
// reader at the top of a long page, or at nothing. Every relative link must name a file that is
// there and, with a fragment, a heading of it (anchors as GitHub makes them).
import fs from 'node:fs/promises';
import path from 'node:path';
import GithubSlugger from 'github-slugger';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Markdown without its fenced code blocks (whose lines are neither headings nor links). */
const withoutFences = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '');
/** Without inline code spans either (whose brackets are not links). */
const prose = (text: string) => withoutFences(text).replace(/`[^`\n]*`/g, '');

async function anchorsOf(file: string): Promise<Set<string>> {
  const slugger = new GithubSlugger();
  const text = withoutFences(await fs.readFile(file, 'utf8'));
  const anchors = new Set<string>();
  for (const [, heading] of text.matchAll(/^#{1,6} +(.+?) *#*$/gm)) anchors.add(slugger.slug(heading!.replace(/[`*]/g, '')));
  return anchors;
}

async function documents(): Promise<string[]> {
  const docs = (await fs.readdir(path.join(ROOT, 'docs'))).filter((n) => n.endsWith('.md')).map((n) => path.join(ROOT, 'docs', n));
  return [path.join(ROOT, 'README.md'), ...docs];
}

/** Every relative link of `file` that resolves to no file, or to no heading of it. */
async function brokenLinks(file: string): Promise<string[]> {
  const broken: string[] = [];
  for (const [, target] of prose(await fs.readFile(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(target!)) continue;
    const [rel, fragment] = target!.split('#') as [string, string | undefined];
    const linked = rel === '' ? file : path.resolve(path.dirname(file), rel);
    const there = await fs.stat(linked).then(() => true, () => false);
    if (!there) broken.push(`${target} (no such file)`);
    else if (fragment && linked.endsWith('.md') && !(await anchorsOf(linked)).has(fragment)) broken.push(`${target} (no such heading)`);
  }
  return broken;
}

describe('the README and docs/', () => {
  it('link only to files that are there and to headings those files have', async () => {
    const files = await documents();
    expect(files.length).toBeGreaterThan(3);
    const broken: Record<string, string[]> = {};
    for (const file of files) {
      const found = await brokenLinks(file);
      if (found.length > 0) broken[path.relative(ROOT, file)] = found;
    }
    expect(broken).toEqual({});
  });
});
