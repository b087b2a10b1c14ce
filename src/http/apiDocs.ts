// The API's own description: /openapi.json (generated from the route table and the schemas,
// openapi.ts) and Swagger UI under /docs, from its npm package, served offline.
import { createRequire } from 'node:module';
import path from 'node:path';
import { Router, type RequestHandler } from 'express';
import { PAGE_SECURITY_HEADERS } from './pageSecurity.js';
import { staticFiles } from './staticFiles.js';
import { openApiDocument } from './openapi.js';
import type { Handlers } from './route.js';
import { applyEncoding, encodeOnce, negotiateEncoding, type Encoding } from './encoding.js';
import { readQuery, throwIfAny } from './query.js';

/** The static files of swagger-ui-dist (found, not imported: importing loads its whole bundle). */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

export function apiDocsHandlers(): Handlers {
  const document = JSON.stringify(openApiDocument());
  // Some 100 KB of JSON, the same for the process's life: each encoding made once, when first asked.
  const encoded = new Map<Encoding, Promise<Buffer>>();
  const openApiJson: RequestHandler = (req, res, next) => {
    throwIfAny(readQuery(req, []).details);
    const encoding = negotiateEncoding(req, true);
    applyEncoding(res, encoding);
    let body = encoded.get(encoding);
    if (!body) {
      encoded.set(encoding, (body = encodeOnce(document, encoding)));
      // A failure is the asking request's; the next one tries again.
      body.catch(() => encoded.delete(encoding));
    }
    body.then((buf) => res.set('Cache-Control', 'public, max-age=300').type('application/json').send(buf), next);
  };
  const docs = Router();
  // Its page holds an Authorize box for partner keys: the explorer's policy, framing refused.
  docs.use((_req, res, next) => {
    res.set(PAGE_SECURITY_HEADERS);
    next();
  });
  docs.get('/', (req, res, next) => (req.originalUrl.split('?', 1)[0] === '/docs' && !req.originalUrl.endsWith('/') ? res.redirect(301, '/docs/') : next()));
  // Our initializer points Swagger UI at /openapi.json.
  docs.get('/swagger-initializer.js', (_req, res) => {
    res.type('application/javascript').send(
      "window.onload = () => { window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null, presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'StandaloneLayout' }); };",
    );
  });
  // The package's own initializer (the Petstore's document) is ours above, however its path is spelt.
  docs.use(staticFiles(SWAGGER_UI_DIR, { index: 'index.html', hidden: ['swagger-initializer.js'] }));
  return { openApiJson, docs };
}
