// The Dialtone console: sign in with an API key, then the shell (navigation, the event stream's
// status, the run states read once) around the page the path names (pages.js).
import { html, render, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError, EventStream, onUnauthorized, session } from './api.js';
import { PAGES } from './pages.js';
import { loadRunStates, RunStatesContext } from './run-states.js';
import { ErrorBox, Link, valueOf } from './ui.js';
/** @import { StreamRole, StreamStatus } from './api.js' */
/** @import { RunStates } from './run-states.js' */

/** @param {{ onSignedIn: () => void, notice: ApiError | null }} props */
function SignIn({ onSignedIn, notice }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(/** @type {unknown} */ (notice));
  const [busy, setBusy] = useState(false);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // Any read proves the key; the workflows are small.
      await api('/workflows', { key: key.trim() });
      session.signIn(key.trim());
      onSignedIn();
    } catch (e) {
      setError(e instanceof ApiError && e.status === 401 ? new ApiError(401, { detail: 'That API key was not accepted. Check it and try again.' }) : e);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="signin">
    <h1>Dialtone console</h1>
    <form onSubmit=${submit}>
      <label for="api-key">API key</label>
      <input id="api-key" name="api-key" type="password" autocomplete="off" spellcheck="false" required value=${key} onInput=${(/** @type {Event} */ e) => setKey(valueOf(e))} />
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
    <${ErrorBox} error=${error} />
    <p class="hint">The key is kept in this tab only (session storage) and sent as the X-API-Key header.</p>
  </main>`;
}

function usePath() {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    addEventListener('popstate', update);
    return () => removeEventListener('popstate', update);
  }, []);
  return path;
}

/** @param {{ onSignOut: () => void }} props */
function Shell({ onSignOut }) {
  const path = usePath();
  const [stream] = useState(() => new EventStream());
  const [status, setStatus] = useState(/** @type {StreamStatus} */ ('connecting'));
  const [role, setRole] = useState(/** @type {StreamRole | undefined} */ (undefined));
  const [states, setStates] = useState(/** @type {RunStates | null} */ (null));
  const [statesError, setStatesError] = useState(/** @type {unknown} */ (null));
  // Bumped by a stream reset (the service's database went back in time): the page is built afresh,
  // so nothing it shows comes from the events before.
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    const stops = [stream.onStatus(setStatus), stream.onRole(setRole), stream.subscribeResets(() => setGeneration((g) => g + 1))];
    stream.start();
    return () => {
      for (const stop of stops) stop();
      stream.stop();
    };
  }, [stream]);
  // Read once per sign-in (a reload reads them again): every page shows states, and they change
  // only with a new release of the service. `attempt` is bumped by Try again after a failed read.
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setStatesError(null);
    loadRunStates().then(setStates, setStatesError);
  }, [attempt]);
  const page = PAGES.find((p) => p.path.test(path));
  const params = page?.path.exec(path)?.slice(1) ?? [];
  const Page = page?.component;
  useEffect(() => {
    document.title = page?.nav ? `${page.nav.label} · Dialtone` : 'Dialtone console';
  }, [page]);
  const body = !Page
    ? html`<p>No such page. <${Link} href="/console">Go to calls</${Link}>.</p>`
    : states
      ? html`<${RunStatesContext.Provider} value=${states}><${Page} key=${generation} params=${params} stream=${stream} /></${RunStatesContext.Provider}>`
      : statesError
        ? html`<${ErrorBox} error=${statesError} /><p><button type="button" class="secondary" onClick=${() => setAttempt((a) => a + 1)}>Try again</button></p>`
        : html`<p>Loading…</p>`;
  return html`<div class="shell">
    <header>
      <span class="brand">Dialtone</span>
      <nav aria-label="Console">
        ${PAGES.map((p) => (p.nav ? html`<${Link} href=${p.nav.href} aria-current=${p === page ? 'page' : undefined}>${p.nav.label}</${Link}>` : null))}
      </nav>
      <span class="stream-status" data-testid="stream-status" data-stream-role=${role} aria-live="polite">${status === 'live' ? 'Live' : status === 'reconnecting' ? 'Reconnecting…' : 'Connecting…'}</span>
      <button type="button" class="secondary" onClick=${onSignOut}>Sign out</button>
    </header>
    <main>${body}</main>
  </div>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(session.key));
  const [notice, setNotice] = useState(/** @type {ApiError | null} */ (null));
  useEffect(
    () =>
      onUnauthorized(() => {
        session.signOut();
        setNotice(new ApiError(401, { detail: 'The API key is no longer accepted. Sign in again.' }));
        setSignedIn(false);
      }),
    [],
  );
  if (!signedIn) return html`<${SignIn} notice=${notice} onSignedIn=${() => setSignedIn(true)} />`;
  return html`<${Shell} onSignOut=${() => {
    session.signOut();
    setNotice(null);
    setSignedIn(false);
  }} />`;
}

const root = document.getElementById('app');
if (root) render(html`<${App} />`, root);
