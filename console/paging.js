// Cursor paging as the public lists do it (`?after=&limit=` → `{ data, next_after }`): the page
// shown, the `after` of each page before it (for Previous), its reload, and the pager's buttons.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
/** @import { Page } from './types.js' */
/** @import { StateUpdater } from './vendor-htm-preact.js' */

/**
 * A list read page by page.
 * @template T
 * @typedef {object} CursorPages
 * @property {Page<T> | null} page null until the first read
 * @property {StateUpdater<Page<T> | null>} setPage
 * @property {unknown} error
 * @property {StateUpdater<unknown>} setError
 * @property {() => Promise<void>} load reads the page shown again
 * @property {boolean} firstPage
 * @property {() => void} previous
 * @property {() => void} next
 */

/**
 * The page of `path` (which may carry a query of its own) at the current cursor; `load` reads it
 * again (after a change on it). A new `path` starts from its first page.
 * @template T
 * @param {string} path
 * @param {number} pageSize
 * @returns {CursorPages<T>}
 */
export function useCursorPages(path, pageSize) {
  const [cursors, setCursors] = useState(/** @type {number[]} */ ([])); // the `after` of each page before this one
  const [page, setPage] = useState(/** @type {Page<T> | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const after = cursors[cursors.length - 1];
  // Another path (a filter changed) is another list: its pages start again.
  useEffect(() => setCursors((current) => (current.length ? [] : current)), [path]);
  const load = useCallback(async () => {
    try {
      const params = new URLSearchParams({ limit: String(pageSize) });
      if (after) params.set('after', String(after));
      /** @type {Page<T>} */
      const read = await api(`${path}${path.includes('?') ? '&' : '?'}${params}`);
      setPage(read);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [path, pageSize, after]);
  useEffect(() => void load(), [load]);
  return {
    page,
    setPage,
    error,
    setError,
    load,
    firstPage: cursors.length === 0,
    previous: () => setCursors(cursors.slice(0, -1)),
    next: () => {
      if (page && page.next_after !== null) setCursors([...cursors, page.next_after]);
    },
  };
}

/**
 * Previous / Next for a useCursorPages list.
 * @param {{ pages: CursorPages<unknown> }} props
 */
export function Pager({ pages }) {
  return html`<div class="pager">
    <button type="button" class="secondary" disabled=${pages.firstPage} onClick=${pages.previous}>Previous</button>
    <button type="button" class="secondary" disabled=${!pages.page || pages.page.next_after === null} onClick=${pages.next}>Next</button>
  </div>`;
}
