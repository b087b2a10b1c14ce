// A feed body must be UTF-8. Decoders replace invalid bytes with U+FFFD, which would store
// a report different from the one sent, so invalid bytes are found before JSON.parse and
// reported with the field whose string holds them.
import type { ErrorDetail } from '../shared/errors.js';
import { fieldAt } from '../shared/jsonText.js';

const strict = new TextDecoder('utf-8', { fatal: true });

/** Undefined when `bytes` are valid UTF-8; otherwise the problem, naming the JSON field it falls in. */
export function invalidUtf8(bytes: Uint8Array): ErrorDetail | undefined {
  try {
    strict.decode(bytes);
    return undefined;
  } catch {
    const offset = firstInvalidByte(bytes);
    const where = fieldAt(Buffer.from(bytes.buffer, bytes.byteOffset, offset).toString('utf8'));
    return {
      in: 'body',
      field: where.field,
      message: `${where.inKey ? 'has a property name that is' : 'is'} not valid UTF-8 (byte ${offset} of the body); send text as UTF-8`,
    };
  }
}

/** Offset of the first byte that does not start or continue a valid UTF-8 sequence. */
function firstInvalidByte(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    let n: number;
    let min: number;
    if (c < 0x80) {
      i += 1;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) [n, min] = [1, 0x80];
    else if (c >= 0xe0 && c <= 0xef) [n, min] = [2, 0x800];
    else if (c >= 0xf0 && c <= 0xf4) [n, min] = [3, 0x10000];
    else return i;
    let cp = c & (0x3f >> n);
    for (let k = 1; k <= n; k += 1) {
      const cc = b[i + k];
      if (cc === undefined || (cc & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid too.
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return i;
    i += n + 1;
  }
  return b.length;
}
