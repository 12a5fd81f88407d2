// The Dialtone console: sign in with an API key, then the shell (navigation, the event stream's
// status, the run states read once) around the page the path names (pages.js). The shell reads
// what the key may do (GET /api-keys/current, which any key may read) and shows only the pages its
// scopes allow; the stream and the run states, which need `calls`, are read only with it.
import { html, render, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError, EventStream, onUnauthorized, session } from './api.js';
import { PAGES } from './pages.js';
import { loadRunStates, RunStatesContext } from './run-states.js';
import { ErrorBox, Link, valueOf } from './ui.js';
/** @import { StreamRole, StreamStatus } from './api.js' */
/** @import { RunStates } from './run-states.js' */
/** @import { ApiKey, Scope } from './types.js' */
/** @import { PageEntry } from './pages.js' */

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
      // The one read any key may make, whatever its scopes.
      await api('/api-keys/current', { key: key.trim() });
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

/**
 * The key signed in with: its scopes decide the pages, the stream and the run states.
 * @param {{ onSignOut: () => void }} props
 */
function Shell({ onSignOut }) {
  const [me, setMe] = useState(/** @type {ApiKey | null} */ (null));
  const [meError, setMeError] = useState(/** @type {unknown} */ (null));
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setMeError(null);
    /** @type {Promise<ApiKey>} */
    const read = api('/api-keys/current');
    read.then(setMe, setMeError);
  }, [attempt]);
  if (me) return html`<${SignedIn} me=${me} onSignOut=${onSignOut} />`;
  return html`<main>${meError
    ? html`<${ErrorBox} error=${meError} /><p><button type="button" class="secondary" onClick=${() => setAttempt((a) => a + 1)}>Try again</button> <button type="button" class="secondary" onClick=${onSignOut}>Sign out</button></p>`
    : html`<p>Loading…</p>`}</main>`;
}

/**
 * What a key without `calls` is given for the run states: it sees no page that shows runs.
 * @type {RunStates}
 */
const NO_RUN_STATES = { all: [], isKnown: () => false, isTerminal: () => false };

/** @param {{ me: ApiKey, onSignOut: () => void }} props */
function SignedIn({ me, onSignOut }) {
  const path = usePath();
  const scopes = /** @type {Scope[]} */ (me.scopes);
  const calls = scopes.includes('calls');
  const missing = (/** @type {PageEntry} */ p) => (p.scopes ?? []).filter((s) => !scopes.includes(s));
  const allowed = PAGES.filter((p) => missing(p).length === 0);
  const [stream] = useState(() => new EventStream());
  const [status, setStatus] = useState(/** @type {StreamStatus} */ ('connecting'));
  const [role, setRole] = useState(/** @type {StreamRole | undefined} */ (undefined));
  const [states, setStates] = useState(/** @type {RunStates | null} */ (null));
  const [statesError, setStatesError] = useState(/** @type {unknown} */ (null));
  // Bumped by a stream reset (the service's database went back in time): the page is built afresh,
  // so nothing it shows comes from the events before.
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    // The stream needs `calls`: a key without it has no live updates, and says so.
    if (!calls) return undefined;
    const stops = [stream.onStatus(setStatus), stream.onRole(setRole), stream.subscribeResets(() => setGeneration((g) => g + 1))];
    stream.start();
    return () => {
      for (const stop of stops) stop();
      stream.stop();
    };
  }, [stream, calls]);
  // Read once per sign-in (a reload reads them again): every page that shows runs shows states, and
  // they change only with a new release of the service. `attempt` is bumped by Try again after a
  // failed read. A key without `calls` may not read them, and sees no page that needs them.
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setStatesError(null);
    if (calls) loadRunStates().then(setStates, setStatesError);
    else setStates(NO_RUN_STATES);
  }, [attempt, calls]);
  const matched = PAGES.find((p) => p.path.test(path));
  // The first page the key may see (the Calls page, for a key with `calls`).
  const home = allowed.find((p) => p.nav)?.nav?.href ?? '/console';
  const page = matched && allowed.includes(matched) ? matched : undefined;
  const params = page?.path.exec(path)?.slice(1) ?? [];
  const Page = page?.component;
  useEffect(() => {
    document.title = page?.nav ? `${page.nav.label} · Dialtone` : 'Dialtone console';
  }, [page]);
  // Signing in opens /console, the Calls page: a key that may not read calls is taken to its first page.
  const landing = /^\/console\/?$/.test(path) && !page && home !== '/console';
  useEffect(() => {
    if (!landing) return;
    history.replaceState(null, '', home);
    dispatchEvent(new PopStateEvent('popstate'));
  }, [landing, home]);
  const body = !matched
    ? html`<p>No such page. <${Link} href=${home}>Go to the console</${Link}>.</p>`
    : !Page
      ? html`<p data-testid="missing-scope">This key lacks the ${missing(matched).map((s, i, all) => html`${i === 0 ? '' : i === all.length - 1 ? ' and ' : ', '}<code>${s}</code>`)} scope${missing(matched).length > 1 ? 's' : ''} this page needs. <${Link} href=${home}>Go to a page it may see</${Link}>.</p>`
      : states
        ? html`<${RunStatesContext.Provider} value=${states}><${Page} key=${generation} params=${params} stream=${stream} scopes=${scopes} /></${RunStatesContext.Provider}>`
        : statesError
          ? html`<${ErrorBox} error=${statesError} /><p><button type="button" class="secondary" onClick=${() => setAttempt((a) => a + 1)}>Try again</button></p>`
          : html`<p>Loading…</p>`;
  return html`<div class="shell">
    <header>
      <span class="brand">Dialtone</span>
      <nav aria-label="Console">
        ${allowed.map((p) => (p.nav ? html`<${Link} href=${p.nav.href} aria-current=${p === page ? 'page' : undefined}>${p.nav.label}</${Link}>` : null))}
      </nav>
      <span class="session">
        <span class="key-name hint" data-testid="key-name" title=${`Signed in with ${me.name} (${scopes.join(', ')})`}>${me.name}</span>
        <span class="stream-status" data-testid="stream-status" data-stream-role=${role} aria-live="polite">${!calls ? 'No live updates' : status === 'live' ? 'Live' : status === 'reconnecting' ? 'Reconnecting…' : 'Connecting…'}</span>
      </span>
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
