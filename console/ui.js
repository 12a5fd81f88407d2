// Small shared pieces: the state badge, times and a call's duration, error boxes, form fields' values, navigation.
import { html } from './vendor-htm-preact.js';
import { ApiError } from './api.js';
/** @import { VNode } from './vendor-htm-preact.js' */
/** @import { Run } from './types.js' */

/**
 * A run state as text and colour (the colour only repeats the text, never replaces it).
 * @param {{ state: string, testid?: string }} props
 */
export function StateBadge({ state, testid }) {
  return html`<span class=${`state state-${state}`} data-testid=${testid}>${state.replace('_', ' ')}</span>`;
}

/**
 * Seconds on the call (answered to ended), or null for a call never answered (or not ended).
 * @param {Run} run
 */
export function callSeconds(run) {
  if (!run.answered_at || !run.ended_at) return null;
  return Math.max(0, (Date.parse(run.ended_at) - Date.parse(run.answered_at)) / 1000);
}

/**
 * Time on the call (answered to ended); a call that was never answered has none.
 * @param {Run} run
 */
export function callDuration(run) {
  const seconds = callSeconds(run);
  if (seconds === null) return '—';
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
}

/** @param {string | null | undefined} iso */
export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/**
 * What went wrong, if anything: an API refusal with its detail and field errors, anything else
 * thrown (a bug) with its message.
 * @param {{ error: unknown }} props
 */
export function ErrorBox({ error }) {
  if (!error) return null;
  const problem = error instanceof ApiError ? error : new ApiError(0, { detail: error instanceof Error ? error.message : String(error) });
  // A problem about one field often repeats its detail as that field's error: say it once.
  const listed = problem.errors.filter((e) => e.detail !== problem.message);
  return html`<div class="error" role="alert" data-code=${problem.code}>
    <p>${problem.message}</p>
    ${listed.length ? html`<ul>${listed.map((e) => html`<li>${e.pointer ? `${e.pointer}: ` : ''}${e.detail}</li>`)}</ul>` : null}
  </div>`;
}

/**
 * The value of the input, select or textarea an event is from.
 * @param {Event} event
 */
export function valueOf(event) {
  return /** @type {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} */ (event.currentTarget).value;
}

/**
 * The file chosen in the file input an event is from, if any.
 * @param {Event} event
 */
export function fileOf(event) {
  return /** @type {HTMLInputElement} */ (event.currentTarget).files?.[0] ?? null;
}

/**
 * The handlers of a form's fields, each setting its field of `form` (a record of strings) from its
 * input: `onInput=${field('phone')}`.
 * @template {Record<string, string>} F
 * @param {F} form
 * @param {(next: F) => void} setForm
 * @returns {(name: keyof F) => (event: Event) => void}
 */
export function fieldSetter(form, setForm) {
  return (name) => (event) => setForm({ ...form, [name]: valueOf(event) });
}

/**
 * Client-side navigation within /console (links keep working as plain links too).
 * @param {string} path
 */
export function navigate(path) {
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

/** @param {{ href: string, children?: unknown, [attribute: string]: unknown }} props */
export function Link({ href, children, ...rest }) {
  /** @param {MouseEvent} event */
  const onClick = (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${onClick} ...${rest}>${children}</a>`;
}

/** @typedef {VNode | null} Rendered what a component gives Preact */
