// The shape of a route in the route table (routes.ts, ogc/routes.ts), and what is derived from
// it: the Allow header of its 405, the OpenAPI path of its document, the handler sets modules
// fill. One declaration per path: the app mounts it, answers 404 and 405 from it, labels its
// metrics with it, and the OpenAPI document is generated from it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';

export type Verb = 'get' | 'post' | 'delete';

/** An OpenAPI operation or path item, as the document writes it. */
export type PathItem = Record<string, unknown>;

export interface Route {
  /** The path as Express matches it, and as 404s, 405s and request metrics name it. */
  path: string;
  /** The handler of each method, by its name in the handler sets the app is given. */
  serve: Partial<Record<Verb, string>>;
  /** Served by the request layer on Node's own request and response, before Express (layer.ts). */
  direct?: boolean;
  /** A public read: counted by the per-address read rate limit (the limit covers its first path segment). */
  readLimit?: boolean;
  /** Allow names OPTIONS: a CORS preflight is answered. */
  preflight?: boolean;
  /** Named neither in 404s nor by a 405 of its own: another route's path covers it. */
  unlisted?: boolean;
  /** Its OpenAPI path items, by document path; absent: not in the public document. */
  doc?: () => Record<string, PathItem>;
  /** Query strings a new process asks this route for before it says it listens (warmUp.ts), given the window to ask for. */
  warmUp?: (window: string) => string[];
}

/** A public read: under the per-address read rate limit, and a CORS preflight is answered. */
export const PUBLIC_READ = { readLimit: true, preflight: true } as const;

/** A prefix served by one handler as a whole (static files). */
export interface Mount {
  prefix: string;
  serve: string;
  /** Named in 404s. */
  listed?: boolean;
}

/** A handler the request layer calls on Node's request and response; its errors are answered by the shared error handler. */
export type DirectHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Handlers by name, as the route table names them. */
export type Handlers = Record<string, RequestHandler | RequestHandler[]>;

/** The methods a route allows, as its 405's Allow header says them. */
export function allowOf(route: Route): string {
  const methods: string[] = [];
  if (route.serve.get) methods.push('GET', 'HEAD');
  if (route.serve.post) methods.push('POST');
  if (route.serve.delete) methods.push('DELETE');
  if (route.preflight) methods.push('OPTIONS');
  return methods.join(', ');
}

/** The OpenAPI paths of a table, in its order. */
export function documentPaths(routes: readonly Route[]): Record<string, PathItem> {
  return Object.assign({}, ...routes.map((r) => r.doc?.() ?? {})) as Record<string, PathItem>;
}

/**
 * A handler set a module fills as it defines its handlers (`serve('getCities', async (req, res) => …)`),
 * each named as the route table names it.
 */
export function handlerSet<Name extends string>(): { handlers: Record<Name, RequestHandler[]>; serve: (name: Name, ...chain: RequestHandler[]) => void } {
  const handlers = {} as Record<Name, RequestHandler[]>;
  return { handlers, serve: (name, ...chain) => void (handlers[name] = chain) };
}
