// The Dialtone console: sign in with an API key, then the pages below. Each page is one entry of
// PAGES (path pattern, label, component); a new page is one more entry and one more module.
import { html, render, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError, EventStream, onUnauthorized, session } from './api.js';
import { CallPage, CallsPage } from './calls.js';
import { CampaignsPage } from './campaigns.js';
import { OverviewPage, TestCallPage, WebhooksPage } from './pages.js';
import { SuppressionsPage } from './suppressions.js';
import { ErrorBox, Link } from './ui.js';

const PAGES = [
  { path: /^\/console\/?$/, href: '/console', label: 'Calls', component: CallsPage, nav: true },
  { path: /^\/console\/runs\/(\d+)$/, component: CallPage },
  { path: /^\/console\/test-call$/, href: '/console/test-call', label: 'Test call', component: TestCallPage, nav: true },
  { path: /^\/console\/overview$/, href: '/console/overview', label: 'Overview', component: OverviewPage, nav: true },
  { path: /^\/console\/webhooks$/, href: '/console/webhooks', label: 'Webhook endpoints', component: WebhooksPage, nav: true },
  { path: /^\/console\/campaigns$/, href: '/console/campaigns', label: 'Campaigns', component: CampaignsPage, nav: true },
  { path: /^\/console\/suppressions$/, href: '/console/suppressions', label: 'Suppressions', component: SuppressionsPage, nav: true },
];

function SignIn({ onSignedIn, notice }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(notice);
  const [busy, setBusy] = useState(false);
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
      <input id="api-key" name="api-key" type="password" autocomplete="off" spellcheck="false" required value=${key} onInput=${(e) => setKey(e.currentTarget.value)} />
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

function Shell({ onSignOut }) {
  const path = usePath();
  const [stream] = useState(() => new EventStream());
  const [status, setStatus] = useState('connecting');
  const [role, setRole] = useState(undefined);
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
  const page = PAGES.find((p) => p.path.test(path));
  const params = page ? path.match(page.path).slice(1) : [];
  const Page = page?.component;
  useEffect(() => {
    document.title = page?.label ? `${page.label} · Dialtone` : 'Dialtone console';
  }, [page]);
  return html`<div class="shell">
    <header>
      <span class="brand">Dialtone</span>
      <nav aria-label="Console">
        ${PAGES.filter((p) => p.nav).map((p) => html`<${Link} href=${p.href} aria-current=${p === page ? 'page' : undefined}>${p.label}</${Link}>`)}
      </nav>
      <span class="stream-status" data-testid="stream-status" data-stream-role=${role} aria-live="polite">${status === 'live' ? 'Live' : status === 'reconnecting' ? 'Reconnecting…' : 'Connecting…'}</span>
      <button type="button" class="secondary" onClick=${onSignOut}>Sign out</button>
    </header>
    <main>${Page ? html`<${Page} key=${generation} params=${params} stream=${stream} />` : html`<p>No such page. <${Link} href="/console">Go to calls</${Link}>.</p>`}</main>
  </div>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(session.key));
  const [notice, setNotice] = useState(null);
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

render(html`<${App} />`, document.getElementById('app'));
