// What the query string may carry, whatever the route: a bounded number of parameters
// (Node's parser would silently drop those past 1,000, and a dropped filter widens a
// query), and never a credential: a key in a URL ends up in proxies' and browsers'
// histories, so it is refused, and redacted from our own request log.
import querystring from 'node:querystring';
import { KEY_PATTERN } from '../partners/apiKeys.js';
import { BadRequestError } from '../shared/errors.js';
import { VERSION_ID } from './boundaryVersion.js';

export const MAX_QUERY_PARAMETERS = 100;

const KEY_SHAPED = new RegExp(`^${KEY_PATTERN}$`);

/** Words that make a parameter name a credential's: api_key, apiKey, X-Api-Key, access_token, sig, password… (not "keyword", "author"). */
const CREDENTIAL_WORDS = new Set([
  'key', 'apikey', 'token', 'accesstoken', 'secret', 'password', 'passwd', 'pwd', 'signature', 'sig', 'auth', 'authorization',
  'credential', 'credentials', 'session', 'sessionid', 'bearer', 'jwt',
]);

function isCredentialName(name: string): boolean {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .some((word) => CREDENTIAL_WORDS.has(word));
}

/**
 * Express's "query parser": never truncates (the guard bounds the parameters, and the request
 * line's length the pairs). Node counts empty pairs (`&&`) towards maxKeys: any limit here would
 * let a run of them push a real filter past it, dropped and widening the query.
 */
export function parseQuery(raw: string): Record<string, unknown> {
  return querystring.parse(raw, '&', '=', { maxKeys: 0 });
}

function searchOf(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? '' : url.slice(at + 1);
}

function parameterNames(search: string): string[] {
  return search
    .split('&')
    .filter((p) => p !== '')
    .map((p) => {
      const name = p.split('=', 1)[0]!;
      try {
        return querystring.unescape(name);
      } catch {
        return name;
      }
    });
}

/** The scheme and the user information of a request target in absolute form (`http://user:key@host/…`). */
export const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i;

/** Throws the 400 for a request target that names a user (and perhaps a password: a key) before its host (RFC 9110 4.2.4). */
export function checkUserinfo(url: string): void {
  if (USERINFO.test(url)) {
    throw new BadRequestError(
      'Credentials are never accepted in the URL: send the API key in the X-Api-Key header. A key sent in a URL should be treated as exposed and replaced.',
      [{ in: 'path', field: '(userinfo)', message: 'a user or password before the host is refused; it was not logged' }],
    );
  }
}

/** Throws the 400 for too many parameters or a credential in `url`'s query string (the request layer asks before any route reads it). */
export function checkQueryString(url: string): void {
  const names = parameterNames(searchOf(url));
  if (names.length > MAX_QUERY_PARAMETERS) {
    throw new BadRequestError(`The query string has ${names.length} parameters; at most ${MAX_QUERY_PARAMETERS} are read.`, [
      { in: 'query', field: '(query)', message: `has more than ${MAX_QUERY_PARAMETERS} parameters` },
    ]);
  }
  const credentials = [...new Set(names.filter((n) => isCredentialName(n)))];
  if (credentials.length > 0) {
    throw new BadRequestError(
      'Credentials are never accepted in the URL: send the API key in the X-Api-Key header. A key sent in a URL should be treated as exposed and replaced.',
      credentials.map((field) => ({ in: 'query' as const, field: field.slice(0, 100), message: 'looks like a credential; it is refused and was not logged' })),
    );
  }
}

/**
 * The URL with the value of every credential-like parameter, and of every parameter whose value
 * has the shape of a key (KEY_PATTERN: any key, configured, kept in the ledger or not yet
 * known), replaced. Cursors have that shape too: they go as well, being opaque to a reader. In
 * the path, where reports' keys and file names have that shape as well, the configured keys and
 * any segment shaped like a generated key go.
 */
export function redactUrl(given: string, knownKeys: ReadonlySet<string>): string {
  // A request line in absolute form may name a user and password before its host (refused: see
  // USERINFO): never logged.
  const url = given.replace(USERINFO, '$1[redacted]@');
  const at = url.indexOf('?');
  if (at < 0) return keysWithin(redactPath(url, knownKeys), knownKeys);
  const redacted = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      if (isKeyAsName(name, knownKeys)) return '[redacted]';
      if (eq < 0) return pair;
      return isSecret(name, pair.slice(eq + 1), knownKeys) ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return keysWithin(`${redactPath(url.slice(0, at), knownKeys)}?${redacted}`, knownKeys);
}

/** A generated key's characters (newKey: both cases among them; see GENERATED_KEY_SHAPED). */
const GENERATED_KEY = '(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{32}';

/** A generated key's shape anywhere in a text: 32 key characters, both cases among them, nothing of a key's alphabet either side. */
const GENERATED_KEY_WITHIN = new RegExp(`(?<![A-Za-z0-9_-])${GENERATED_KEY}(?![A-Za-z0-9_-])`, 'g');

/**
 * `text` with every configured key, and every run shaped like a generated key, replaced wherever
 * it stands (`/reports/KEY.cap`, `x="KEY"`, `KEY,other`, a User-Agent): a key pasted into the wrong
 * place is redacted too. Looked for in the decoded text (`%22KEY%22`); a key's characters need no
 * encoding, so each is replaced where it stands in the text as sent.
 */
export function keysWithin(text: string, knownKeys: ReadonlySet<string>): string {
  const plain = decode(text);
  const found = new Set(plain.match(GENERATED_KEY_WITHIN) ?? []);
  for (const key of knownKeys) if (plain.includes(key)) found.add(key);
  // A key with some of its characters percent-encoded is not in the text as sent: the decoded
  // text is logged then, the key redacted from it.
  let out = [...found].every((key) => standsAsSent(text, key)) ? text : plain;
  for (const key of found) out = out.split(key).join('[redacted]');
  return out;
}

/**
 * Whether each place `key` stands in `text` is the key as sent: in `%35abc…` the key `5abc…`
 * follows an escape that encodes its first character, so redacting it there would leave `%3`.
 */
function standsAsSent(text: string, key: string): boolean {
  let at = text.indexOf(key);
  if (at < 0) return false;
  for (; at >= 0; at = text.indexOf(key, at + 1)) {
    if (text[at - 1] === '%' || text[at - 2] === '%') return false;
  }
  return true;
}

/**
 * A generated key (newKey: 24 random bytes as base64url: one without both cases is one in some
 * nine million) and nothing a path names otherwise: reports' keys, files and codes are lower
 * case, or upper case, never both in 32 characters.
 */
const GENERATED_KEY_SHAPED = new RegExp(`^${GENERATED_KEY}$`);

/** Whether `value` has a generated key's shape (a ledger key, not known to the process by its text). */
export function isGeneratedKeyShaped(value: string): boolean {
  return GENERATED_KEY_SHAPED.test(value);
}

/** The path with every segment that is a configured key, or has a generated key's shape, replaced. */
function redactPath(path: string, knownKeys: ReadonlySet<string>): string {
  if (!path.includes('/', 1) && path.length < 17) return path;
  return path
    .split('/')
    .map((segment) => {
      let value = segment;
      try {
        value = decodeURIComponent(segment);
      } catch {
        // Not percent-encoding: compared as sent.
      }
      return knownKeys.has(value) || GENERATED_KEY_SHAPED.test(value) ? '[redacted]' : segment;
    })
    .join('/');
}

function decode(s: string): string {
  try {
    return querystring.unescape(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/**
 * A key pasted as a parameter's name (`?KEY`, `?KEY=1`): a configured key, or a name with a key's
 * shape that no parameter of ours has (they are lower case words joined by `_`).
 */
function isKeyAsName(rawName: string, knownKeys: ReadonlySet<string>): boolean {
  const name = decode(rawName);
  return knownKeys.has(name) || (KEY_SHAPED.test(name) && !/^[a-z_]+$/.test(name));
}

function isSecret(rawName: string, rawValue: string, knownKeys: ReadonlySet<string>): boolean {
  const [name, value] = [decode(rawName), decode(rawValue)];
  if (isCredentialName(name) || knownKeys.has(value)) return true;
  // A boundary version's id has a key's shape, and says which map asked: kept.
  return !(name === 'version' && VERSION_ID.test(value)) && KEY_SHAPED.test(value);
}
