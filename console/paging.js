// Cursor paging as the public lists do it (`?after=&limit=` → `{ data, next_after }`): the page
// shown, the `after` of each page before it (for Previous), its reload, and the pager's buttons.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';

/** The page of `path` at the current cursor; `load` reads it again (after a change on it). */
export function useCursorPages(path, pageSize) {
  const [cursors, setCursors] = useState([]); // the `after` of each page before this one
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  const after = cursors[cursors.length - 1];
  const load = useCallback(async () => {
    try {
      const params = new URLSearchParams({ limit: String(pageSize) });
      if (after) params.set('after', after);
      setPage(await api(`${path}?${params}`));
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
    next: () => page && page.next_after !== null && setCursors([...cursors, page.next_after]),
  };
}

/** Previous / Next for a useCursorPages list. */
export function Pager({ pages }) {
  return html`<div class="pager">
    <button type="button" class="secondary" disabled=${pages.firstPage} onClick=${pages.previous}>Previous</button>
    <button type="button" class="secondary" disabled=${!pages.page || pages.page.next_after === null} onClick=${pages.next}>Next</button>
  </div>`;
}
