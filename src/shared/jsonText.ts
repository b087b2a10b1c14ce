// What a JSON text says that its parser does not tell: which field a position of it falls in (to
// name the field of a bad byte), and a name given twice in one object. RFC 8259 4 leaves such a
// body's meaning to the reader: JSON.parse keeps the last value, other parsers the first, so a
// partner's log, a proxy and the archive could each hold another report.
import type { ErrorDetail } from './errors.js';

type Frame = { kind: 'object'; key: string | undefined; expectingKey: boolean; names: Set<string> } | { kind: 'array'; index: number };

interface Walked {
  stack: Frame[];
  /** The walk ended inside a string (the text was cut there), a name if `stringIsKey`. */
  inString: boolean;
  stringIsKey: boolean;
}

/**
 * Walks a JSON text (or the start of one), keeping the objects and arrays it is inside;
 * `onName` is told each member's name as the parser reads it (escapes decoded), inside its
 * object's frame, and ends the walk by returning true.
 */
function walk(text: string, onName?: (name: string, stack: readonly Frame[]) => boolean): Walked {
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    const top = stack[stack.length - 1];
    if (c === QUOTE) {
      const isKey = top?.kind === 'object' && top.expectingKey;
      const end = closingQuote(text, i);
      if (end < 0) return { stack, inString: true, stringIsKey: isKey };
      if (isKey) {
        top.key = decoded(text.slice(i + 1, end));
        if (onName?.(top.key, stack)) break;
      }
      i = end;
    } else if (c === OPEN_BRACE) stack.push({ kind: 'object', key: undefined, expectingKey: true, names: new Set() });
    else if (c === OPEN_BRACKET) stack.push({ kind: 'array', index: 0 });
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) stack.pop();
    else if (c === COLON && top?.kind === 'object') top.expectingKey = false;
    else if (c === COMMA && top?.kind === 'object') {
      top.expectingKey = true;
      top.key = undefined;
    } else if (c === COMMA && top?.kind === 'array') top.index += 1;
  }
  return { stack, inString: false, stringIsKey: false };
}

const [QUOTE, BACKSLASH, OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET, COLON, COMMA] = [...'"\\{}[]:,'].map((c) => c.charCodeAt(0)) as [number, number, number, number, number, number, number, number];

/** Where the string opened at `open` closes: the next quote not escaped (an odd run of backslashes before it); -1 if none. */
function closingQuote(text: string, open: number): number {
  let end = text.indexOf('"', open + 1);
  while (end > 0 && escaped(text, end)) end = text.indexOf('"', end + 1);
  return end;
}

/** Whether the quote at `at` is escaped: an odd run of backslashes before it. */
function escaped(text: string, at: number): boolean {
  let n = 0;
  while (text.charCodeAt(at - 1 - n) === BACKSLASH) n += 1;
  return n % 2 === 1;
}

/** A string's text between its quotes, its escapes decoded (as written when they are not JSON's). */
function decoded(raw: string): string {
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** "location.lat", "tags[2]": the frames' members as a path. */
const pathOf = (frames: readonly Frame[]) =>
  frames
    .map((f) => (f.kind === 'array' ? `[${f.index}]` : `.${f.key ?? ''}`))
    .join('')
    .replace(/^\./, '');

/**
 * The field whose string the end of `prefix` (valid JSON text up to a bad byte) is in:
 * "title", "location.lat", "tags[2]"; "(body)" outside any string.
 */
export function fieldAt(prefix: string): { field: string; inKey: boolean } {
  const { stack, inString, stringIsKey } = walk(prefix);
  if (!inString) return { field: '(body)', inKey: false };
  const path = pathOf(stringIsKey ? stack.slice(0, -1) : stack);
  return { field: path === '' ? '(body)' : path, inKey: stringIsKey };
}

/**
 * Each name given twice in one object of a JSON text (its second mention), as a problem naming
 * it. `parsed`, the text's value as JSON.parse gave it, saves reading the text: its quotes are
 * two for each name and string written and one for each escaped quote, and the value keeps one
 * of a name given twice (and of its strings), so as many quotes as twice the value's names and
 * strings means no name was given twice.
 */
export function namesGivenTwice(text: string, parsed?: unknown, first = false): ErrorDetail[] {
  if (parsed !== undefined && quotesOf(text) === 2 * namesAndStrings(parsed)) return [];
  const found: ErrorDetail[] = [];
  walk(text, (name, stack) => {
    const top = stack[stack.length - 1] as Extract<Frame, { kind: 'object' }>;
    if (!top.names.has(name)) {
      top.names.add(name);
      return false;
    }
    found.push({ in: 'body', field: pathOf(stack), message: 'is given twice in one object: send each name once' });
    return first;
  });
  return found;
}

/** The first name given twice in one object of a JSON text (namesGivenTwice); undefined when none is. */
export function nameGivenTwice(text: string, parsed?: unknown): ErrorDetail | undefined {
  return namesGivenTwice(text, parsed, true)[0];
}

function quotesOf(text: string): number {
  let n = 0;
  for (let at = text.indexOf('"'); at >= 0; at = text.indexOf('"', at + 1)) n += 1;
  return n;
}

/**
 * The names and the strings of a parsed JSON value, each a pair of quotes in its text. Counted
 * with a list of values to visit, not by recursion: JSON.parse takes nesting deeper than the
 * stack would.
 */
function namesAndStrings(value: unknown): number {
  let n = 0;
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const v = todo.pop();
    if (typeof v === 'string') n += 1;
    else if (Array.isArray(v)) for (const x of v as unknown[]) todo.push(x);
    else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      n += keys.length;
      for (const key of keys) todo.push((v as Record<string, unknown>)[key]);
    }
  }
  return n;
}

/**
 * Whether a JSON text nests objects and lists deeper than `levels` (brackets inside strings are
 * text). Such a value parses, but recursive code (JSON.stringify among it) overflows the stack on
 * it from some thousands of levels.
 */
export function nestsDeeperThan(text: string, levels: number): boolean {
  let openings = 0;
  for (let i = 0; i < text.length && openings <= levels; i++) {
    const c = text.charCodeAt(i);
    if (c === OPEN_BRACE || c === OPEN_BRACKET) openings += 1;
  }
  // Fewer openings in all than the levels: no deeper nesting (the common case, read no further).
  if (openings <= levels) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = closingQuote(text, i);
      if (end < 0) return false;
      i = end;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > levels) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth -= 1;
  }
  return false;
}

/**
 * Whether a parsed JSON value nests objects and lists more than `levels` deep: JSON.parse reads
 * far deeper than JSON.stringify can write back (it overflows the stack). Iterative, for the same
 * reason.
 */
export function valueNestsDeeperThan(value: unknown, levels: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth + 1 > levels) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}
