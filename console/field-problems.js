// A 422's problems shown where they belong: each beside the field its JSON Pointer names, the rest
// (and the problem's own detail) at the top of the form. Shared by the forms that send what a
// person typed as the API's JSON (organization settings, telephony routes).
import { html } from './vendor-htm-preact.js';
import { ApiError } from './api.js';
/** @import { ProblemError } from './types.js' */

/**
 * Problems by the field they are shown beside ('' for those no field owns). A pointer goes to the
 * first field that is it or starts it, so `fields` lists the most specific first; a problem below
 * its field (`/caller_ids/0` beside `/caller_ids`) says where, as `0: …`.
 * @param {ProblemError[]} errors
 * @param {string[]} fields
 */
export function problemsByField(errors, fields) {
  /** @type {Record<string, string[]>} */
  const found = {};
  for (const e of errors) {
    const pointer = e.pointer ?? '';
    const field = fields.find((f) => pointer === f || pointer.startsWith(`${f}/`)) ?? '';
    (found[field] ??= []).push(field === pointer || !pointer ? e.detail : `${pointer.slice(field.length + 1)}: ${e.detail}`);
  }
  return found;
}

/**
 * What the top of the form shows for a refusal: its own detail, and the problems no field owns.
 * @param {unknown} error
 * @param {Record<string, string[]>} found problemsByField's answer for it
 */
export function topError(error, found) {
  if (!(error instanceof ApiError)) return error;
  return new ApiError(error.status, { code: error.code, detail: error.message, errors: (found[''] ?? []).map((detail) => ({ detail })) });
}

/** @param {{ problems: Record<string, string[]>, field: string }} props */
export function FieldProblems({ problems, field }) {
  const list = problems[field];
  if (!list?.length) return null;
  return html`<ul class="field-problems" role="alert" data-testid="field-problem" data-pointer=${field}>${list.map((p) => html`<li>${p}</li>`)}</ul>`;
}
