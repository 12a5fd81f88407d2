// /console: the operator console, a static single-page app (the files in the package's console/
// folder, Preact with htm from the htm package, uPlot from the uplot package for the overview's
// charts, and @dialtone/client with its two ESM dependencies as their packages ship them, no build
// step of its own). It is read into memory once at start-up and served from there: a fixed list of
// files, so no request path ever reaches the file system. Every page of the app (/console, /console/runs/42, …) answers with index.html; the app
// routes in the browser and reads everything else through the public API with the key it was given.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { DialtoneError } from '../../errors.js';

const CONSOLE_DIR = new URL('../../../console/', import.meta.url);

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The inline import map of index.html: it names, for the console's bare imports (@dialtone/client
 * and the client's own), the files loadAssets serves. An import map cannot be a file of its own
 * (browsers do not load `<script type="importmap" src>`), so the CSP allows exactly this one inline
 * script by its hash, and nothing else inline.
 */
function importMapHash(index: string): string {
  const found = /<script type="importmap">([\s\S]*?)<\/script>/.exec(index);
  if (!found) throw new Error('console/index.html has no import map.');
  return `'sha256-${createHash('sha256').update(found[1] as string).digest('base64')}'`;
}

/**
 * No inline script (but the import map, by its hash) or style anywhere (the app sets styles
 * through the DOM, which CSP permits), no other origin, no framing, no plugins; the API is
 * same-origin.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  `script-src 'self' ${importMapHash(readFileSync(new URL('index.html', CONSOLE_DIR), 'utf8'))}`,
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  type: string;
  body: Buffer;
}

export interface ConsoleOptions {
  /**
   * The built `core` entry of @dialtone/client, whose modules the console is served as
   * vendor/dialtone-client/. Default: where `@dialtone/client/core` resolves (packages/client/dist/core.js,
   * written by `npm run build`). A test points it at a file that does not exist to see what an
   * unbuilt install serves, without removing the build others use.
   */
  clientCore?: URL;
}

/**
 * The built modules of @dialtone/client's `core` entry: core.js and, transitively, every module
 * beside it that one of them imports (`from './x.js'`, as tsc writes it), by file name. tsc keeps
 * each import as written, and the client has no dynamic import, so reading them finds the graph.
 */
function clientCoreModules(entry: URL): Map<string, URL> {
  const modules = new Map<string, URL>();
  const pending = [entry];
  for (let file = pending.pop(); file; file = pending.pop()) {
    const name = file.pathname.slice(file.pathname.lastIndexOf('/') + 1);
    if (modules.has(name)) continue;
    modules.set(name, file);
    for (const [, relative] of readFileSync(file, 'utf8').matchAll(/^(?:import|export)\s[^'"]*?\bfrom\s*'(\.\/[\w-]+\.js)';$/gm)) pending.push(new URL(relative as string, file));
  }
  return modules;
}

/** The console's files by URL name under /console/assets/, and the vendored libraries. */
function loadAssets(clientCore: URL): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(CONSOLE_DIR)) {
    const type = TYPES[extname(name)];
    if (type && name !== 'index.html') assets.set(name, { type, body: readFileSync(new URL(name, CONSOLE_DIR)) });
  }
  const script = (file: URL): Asset => ({ type: TYPES['.js'] as string, body: readFileSync(file) });
  // Preact, its hooks and htm in one ES module with no imports of its own (htm's "standalone" build).
  assets.set('vendor-htm-preact.js', { type: TYPES['.js'] as string, body: readFileSync(new URL(import.meta.resolve('htm/preact/standalone'))) });
  // uPlot (the overview's charts): its ES module, which imports nothing, and its style sheet, as published.
  assets.set('vendor-uplot.js', { type: TYPES['.js'] as string, body: readFileSync(new URL(import.meta.resolve('uplot/dist/uPlot.esm.js'))) });
  assets.set('vendor-uplot.css', { type: TYPES['.css'] as string, body: readFileSync(new URL(import.meta.resolve('uplot/dist/uPlot.min.css'))) });
  // @dialtone/client as built (npm run build, which npm ci and npm start run): its `core` entry and
  // the modules it imports by relative path (they import the two below by name: index.html's
  // import map). Not its main entry: that imports standardwebhooks, CommonJS, which a browser
  // cannot load as it is.
  // Not built (sources run through tsx with no TypeScript installed: scripts/build.mjs): the API
  // still serves; the console's page then cannot load, and says why in the asset's 404 (below).
  if (existsSync(clientCore)) {
    for (const [name, file] of clientCoreModules(clientCore)) assets.set(`vendor/dialtone-client/${name}`, script(file));
  }
  // Each one ES module with no imports of its own.
  assets.set('vendor/openapi-fetch.js', script(new URL(import.meta.resolve('openapi-fetch'))));
  assets.set('vendor/eventsource-parser.js', script(new URL(import.meta.resolve('eventsource-parser'))));
  return assets;
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin');
}

export function consoleRoutes(options: ConsoleOptions = {}): FastifyPluginAsync {
  const index = readFileSync(new URL('index.html', CONSOLE_DIR));
  const assets = loadAssets(options.clientCore ?? new URL(import.meta.resolve('@dialtone/client/core')));
  return async (app) => {
    const page = async (_request: unknown, reply: FastifyReply) => secure(reply).header('cache-control', 'no-cache').type(TYPES['.html'] as string).send(index);
    app.get('/', { schema: { hide: true } }, page);
    app.get('/*', { schema: { hide: true } }, async (request, reply) => {
      const path = (request.params as { '*': string })['*'];
      if (!path.startsWith('assets/')) return page(request, reply);
      const asset = assets.get(path.slice('assets/'.length));
      if (!asset) {
        secure(reply);
        const unbuilt = path.startsWith('assets/vendor/dialtone-client/') && !assets.has('vendor/dialtone-client/core.js');
        throw new DialtoneError('not_found', unbuilt ? `No console asset ${path}: @dialtone/client is not built (npm run build).` : `No console asset ${path}.`);
      }
      return secure(reply).header('cache-control', 'no-cache').type(asset.type).send(asset.body);
    });
  };
}
