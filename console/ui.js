// Small shared pieces: the state badge, times, error boxes, navigation helpers.
import { html } from './vendor-htm-preact.js';

export const RUN_STATES = ['queued', 'dialing', 'ringing', 'in_progress', 'completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];
export const TERMINAL_STATES = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];
export const isTerminal = (state) => TERMINAL_STATES.includes(state);

/** A run state as text and colour (the colour only repeats the text, never replaces it). */
export function StateBadge({ state, testid }) {
  return html`<span class=${`state state-${state}`} data-testid=${testid}>${state.replace('_', ' ')}</span>`;
}

export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function ErrorBox({ error }) {
  if (!error) return null;
  // A problem about one field often repeats its detail as that field's error: say it once.
  const listed = (error.errors ?? []).filter((e) => e.detail !== error.message);
  return html`<div class="error" role="alert" data-code=${error.code}>
    <p>${error.message}</p>
    ${listed.length ? html`<ul>${listed.map((e) => html`<li>${e.pointer ? `${e.pointer}: ` : ''}${e.detail}</li>`)}</ul>` : null}
  </div>`;
}

/** Client-side navigation within /console (links keep working as plain links too). */
export function navigate(path) {
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function Link({ href, children, ...rest }) {
  const onClick = (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${onClick} ...${rest}>${children}</a>`;
}
