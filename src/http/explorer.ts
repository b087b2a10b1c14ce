// The explorer page at `/` for browsers, with its own script and style and the map and chart
// libraries served from their npm packages: nothing is fetched from outside the service.
// Other clients asking for `/` get a JSON index of the service's entry points.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Router, type RequestHandler } from 'express';
import { PAGE_SECURITY_HEADERS } from './pageSecurity.js';
import { staticFiles } from './staticFiles.js';
import { projectDir } from '../shared/projectDir.js';
import type { Handlers } from './route.js';

const require = createRequire(import.meta.url);
const packageDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));

/** The project's `web/` folder. */
const webDir = () => path.join(projectDir(), 'web');


const INDEX = {
  service: 'Flood report archive of the Philippines',
  links: [
    { rel: 'explorer', href: '/', type: 'text/html', title: 'Map and downloads (open in a browser)' },
    { rel: 'service-desc', href: '/openapi.json', type: 'application/vnd.oai.openapi+json;version=3.1' },
    { rel: 'service-doc', href: '/docs/', type: 'text/html' },
    { rel: 'cities', href: '/cities', type: 'application/json' },
    { rel: 'archive', href: '/reports/archive', type: 'application/json' },
    { rel: 'feed', href: '/feeds/partner', type: 'application/json' },
  ],
};

export interface ExplorerOptions {
  /** Most reports drawn as points (EXPLORER_MAX_POINTS); the page reads it from its meta tag. */
  maxPoints: number;
}

/** The page or index at `/` (explorer), and the page's files under /explorer (explorerAssets). */
export function explorerHandlers(options: ExplorerOptions): Handlers {
  const web = webDir();
  const page = fs
    .readFileSync(path.join(web, 'index.html'), 'utf8')
    .replace(/(<meta name="explorer-max-points" content=")\d+(">)/, `$1${Math.trunc(options.maxPoints)}$2`);
  const explorer: RequestHandler = (req, res) => {
    res.vary('Accept');
    if (req.accepts(['application/json', 'text/html']) !== 'text/html') {
      res.json(INDEX);
      return;
    }
    res.set({ ...PAGE_SECURITY_HEADERS, 'Cache-Control': 'no-cache' });
    res.type('html').send(page);
  };
  // No index and no redirect of a folder to its slash: /explorer/ lists nothing, so /explorer is a 404 at once.
  const assets = { index: false, redirect: false } as const;
  const explorerAssets = Router();
  explorerAssets.use('/vendor/leaflet', staticFiles(path.join(packageDir('leaflet'), 'dist'), assets));
  explorerAssets.use('/vendor/uplot', staticFiles(path.join(packageDir('uplot'), 'dist'), assets));
  explorerAssets.use('/vendor/topojson', staticFiles(path.join(packageDir('topojson-client'), 'dist'), assets));
  // The page is served at / alone (its security policy, the configured limit): its file is no
  // asset, however its path is spelt (%69ndex.html, //index.html).
  explorerAssets.use(staticFiles(web, { ...assets, hidden: ['index.html'] }));
  return { explorer, explorerAssets };
}

