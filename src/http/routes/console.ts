// /console: the operator console, a static single-page app (the files in the package's console/
// folder, Preact with htm from the htm package, and uPlot from the uplot package for the overview's
// charts, no build step). It is read into memory once at
// start-up and served from there: a fixed list of files, so no request path ever reaches the file
// system. Every page of the app (/console, /console/runs/42, …) answers with index.html; the app
// routes in the browser and reads everything else through the public API with the key it was given.
import { readdirSync, readFileSync } from 'node:fs';
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
 * No inline script or style anywhere (the app sets styles through the DOM, which CSP permits), no
 * other origin, no framing, no plugins; the API is same-origin.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
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

/** The console's files by URL name under /console/assets/, and the vendored UI and chart libraries. */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(CONSOLE_DIR)) {
    const type = TYPES[extname(name)];
    if (type && name !== 'index.html') assets.set(name, { type, body: readFileSync(new URL(name, CONSOLE_DIR)) });
  }
  // Preact, its hooks and htm in one ES module with no imports of its own (htm's "standalone" build).
  assets.set('vendor-htm-preact.js', { type: TYPES['.js'] as string, body: readFileSync(new URL(import.meta.resolve('htm/preact/standalone'))) });
  // uPlot (the overview's charts): its ES module, which imports nothing, and its style sheet, as published.
  assets.set('vendor-uplot.js', { type: TYPES['.js'] as string, body: readFileSync(new URL(import.meta.resolve('uplot/dist/uPlot.esm.js'))) });
  assets.set('vendor-uplot.css', { type: TYPES['.css'] as string, body: readFileSync(new URL(import.meta.resolve('uplot/dist/uPlot.min.css'))) });
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

export function consoleRoutes(): FastifyPluginAsync {
  const index = readFileSync(new URL('index.html', CONSOLE_DIR));
  const assets = loadAssets();
  return async (app) => {
    const page = async (_request: unknown, reply: FastifyReply) => secure(reply).header('cache-control', 'no-cache').type(TYPES['.html'] as string).send(index);
    app.get('/', { schema: { hide: true } }, page);
    app.get('/*', { schema: { hide: true } }, async (request, reply) => {
      const path = (request.params as { '*': string })['*'];
      if (!path.startsWith('assets/')) return page(request, reply);
      const asset = assets.get(path.slice('assets/'.length));
      if (!asset) {
        secure(reply);
        throw new DialtoneError('not_found', `No console asset ${path}.`);
      }
      return secure(reply).header('cache-control', 'no-cache').type(asset.type).send(asset.body);
    });
  };
}
