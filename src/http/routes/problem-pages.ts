// /problems/<code>: the page a problem's `type` URI names (RFC 9457 section 3.1.1 asks that a type
// URI resolve to documentation a person can read). One static HTML page per code, built from
// PROBLEMS and PROBLEM_GUIDE at start-up: its title, its status, when it is answered and what to do,
// and /problems lists them all. Outside the OpenAPI document: these are pages, not API operations.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { ERROR_CODES, DialtoneError, type ErrorCode } from '../../errors.js';
import { PROBLEM_GUIDE } from '../problem-guide.js';
import { PROBLEMS, problemType } from '../problems.js';

/** Nothing but the markup itself: no script, no style, no other origin, no framing. */
export const PROBLEM_PAGE_CSP = ["default-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"].join('; ');

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);

function page(title: string, body: string): string {
  return [
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)} · Dialtone</title></head>`,
    `<body>${body}</body>`,
    '</html>',
    '',
  ].join('\n');
}

/** A code's page: what a client reading the problem's `type` wants to know. */
export function problemPage(code: ErrorCode): string {
  const { status, title } = PROBLEMS[code];
  const { when, action } = PROBLEM_GUIDE[code];
  return page(
    title,
    [
      `<h1>${escapeHtml(title)}</h1>`,
      '<dl>',
      `<dt>Code</dt><dd><code>${escapeHtml(code)}</code></dd>`,
      `<dt>HTTP status</dt><dd>${status}</dd>`,
      `<dt>Type</dt><dd><code>${escapeHtml(problemType(code))}</code></dd>`,
      '</dl>',
      '<h2>When it happens</h2>',
      `<p>${escapeHtml(when)}</p>`,
      '<h2>What to do</h2>',
      `<p>${escapeHtml(action)}</p>`,
      '<p>Every problem is an RFC 9457 problem details object (<code>application/problem+json</code>) with this <code>code</code> and the <code>request_id</code> of the request, also sent as the X-Request-Id header: quote it when asking the operator. <a href="/problems">Every problem code</a> · <a href="/docs">API reference</a></p>',
    ].join('\n'),
  );
}

function indexPage(): string {
  const rows = ERROR_CODES.map((code) => `<li><a href="${escapeHtml(problemType(code))}"><code>${escapeHtml(code)}</code></a> (${PROBLEMS[code].status}): ${escapeHtml(PROBLEMS[code].title)}</li>`);
  return page('Problem codes', ['<h1>Problem codes</h1>', '<p>The <code>code</code> of every problem details answer the service gives, with its HTTP status.</p>', `<ul>\n${rows.join('\n')}\n</ul>`].join('\n'));
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', PROBLEM_PAGE_CSP)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer');
}

export function problemPageRoutes(): FastifyPluginAsync {
  // Rendered once: the pages depend on nothing but the code tables.
  const pages = new Map<string, string>(ERROR_CODES.map((code) => [code, problemPage(code)]));
  const index = indexPage();
  return async (app) => {
    app.get('/problems', { schema: { hide: true } }, async (_request, reply) => secure(reply).type('text/html; charset=utf-8').send(index));
    app.get('/problems/:code', { schema: { hide: true } }, async (request, reply) => {
      const { code } = request.params as { code: string };
      const html = pages.get(code);
      if (html === undefined) throw new DialtoneError('not_found', `No problem code ${code}.`);
      return secure(reply).type('text/html; charset=utf-8').send(html);
    });
  };
}
