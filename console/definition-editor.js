// An agent's definition edited as JSON text, with line numbers, and its problems shown at their
// place: each problem the API names by JSON Pointer (or JSON.parse by offset) is listed with its
// pointer and line, its line is marked in the gutter, and choosing it selects its text. After a
// refusal the first problem is selected. Used by the New agent and Agent pages.
import { html, useEffect, useRef } from './vendor-htm-preact.js';
import { lineAt, locatePointer, syntaxErrorOffset } from './json-positions.js';

/**
 * A problem of the text: at a pointer into the definition, at an offset (a syntax error), or neither.
 * @typedef {{ detail: string, pointer?: string, offset?: number }} DefinitionProblem
 */

/** @typedef {DefinitionProblem & { start: number, end: number, line: number | null }} PlacedProblem */

/**
 * The definition the text holds, or the syntax problem that stops it being one.
 * @param {string} text
 * @returns {{ ok: true, value: unknown } | { ok: false, problem: DefinitionProblem }}
 */
export function parseDefinition(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    const offset = syntaxErrorOffset(text, e);
    return { ok: false, problem: { detail: `Not JSON: ${e instanceof Error ? e.message : String(e)}`, ...(offset === null ? {} : { offset }) } };
  }
}

/** A definition as the editor shows it. @param {unknown} definition */
export function definitionText(definition) {
  return JSON.stringify(definition, null, 2);
}

/**
 * @param {string} text
 * @param {DefinitionProblem[]} problems
 * @returns {PlacedProblem[]}
 */
function place(text, problems) {
  return problems.map((p) => {
    if (p.offset !== undefined) {
      const start = Math.min(p.offset, text.length);
      return { ...p, start, end: Math.min(start + 1, text.length), line: lineAt(text, start) };
    }
    const found = p.pointer === undefined ? null : locatePointer(text, p.pointer);
    return found ? { ...p, start: found.start, end: found.end, line: found.line } : { ...p, start: 0, end: 0, line: null };
  });
}

/**
 * @param {{ id: string, label: string, text: string, onText?: (text: string) => void, problems: DefinitionProblem[], problemsText?: string, readOnly?: boolean }} props
 *   `problemsText` is the text the problems were found in (what was sent); they are placed in it.
 */
export function DefinitionEditor({ id, label, text, onText, problems, problemsText, readOnly = false }) {
  const area = useRef(/** @type {HTMLTextAreaElement | null} */ (null));
  const gutter = useRef(/** @type {HTMLDivElement | null} */ (null));
  const placed = place(problemsText ?? text, problems);
  const marked = new Set(placed.map((p) => p.line).filter((l) => l !== null));
  const lines = text.split('\n').length;

  /** @param {PlacedProblem} p */
  const select = (p) => {
    const el = area.current;
    if (!el) return;
    el.focus();
    el.setSelectionRange(p.start, p.end);
    // Bring its line into view: the selection alone does not scroll a textarea in every browser.
    const lineHeight = parseFloat(getComputedStyle(el).lineHeight) || 20;
    if (p.line !== null) el.scrollTop = Math.max(0, (p.line - 3) * lineHeight);
    if (gutter.current) gutter.current.scrollTop = el.scrollTop;
  };
  // A new refusal: its first placed problem is selected.
  const first = placed.find((p) => p.line !== null);
  useEffect(() => {
    if (first) select(first);
  }, [problems]);

  return html`<div class="definition-editor">
    <label for=${id}>${label}</label>
    <div class="editor">
      <div class="gutter" aria-hidden="true" ref=${gutter}>
        ${Array.from({ length: lines }, (_, i) => html`<span key=${i} class=${marked.has(i + 1) ? 'problem-line' : undefined} data-testid=${marked.has(i + 1) ? 'problem-line' : undefined}>${i + 1}</span>`)}
      </div>
      <textarea
        id=${id}
        name=${id}
        rows="20"
        wrap="off"
        spellcheck="false"
        autocomplete="off"
        readonly=${readOnly}
        aria-invalid=${placed.length ? 'true' : undefined}
        aria-describedby=${placed.length ? `${id}-problems` : undefined}
        value=${text}
        ref=${area}
        onInput=${(/** @type {Event} */ e) => onText?.(/** @type {HTMLTextAreaElement} */ (e.currentTarget).value)}
        onScroll=${(/** @type {Event} */ e) => {
          if (gutter.current) gutter.current.scrollTop = /** @type {HTMLTextAreaElement} */ (e.currentTarget).scrollTop;
        }}
      ></textarea>
    </div>
    ${placed.length
      ? html`<ul class="definition-problems" id=${`${id}-problems`} role="alert" aria-label="Problems in the definition">
          ${placed.map(
            (p, i) => html`<li key=${i} data-testid="definition-problem" data-pointer=${p.pointer} data-line=${p.line ?? undefined}>
              ${p.line !== null
                ? html`<button type="button" class="link" onClick=${() => select(p)}>Line ${p.line}</button>${' '}`
                : null}${p.pointer !== undefined ? html`<code>${p.pointer || '/'}</code>: ` : null}${p.detail}
            </li>`,
          )}
        </ul>`
      : null}
  </div>`;
}
