// The console's only way to the service: the public API, same origin, with the API key in the
// X-API-Key header. The key lives in sessionStorage (gone when the tab closes) and is never put in
// a URL, a cookie or a log line.
const KEY_NAME = 'dialtone.apiKey';

export const session = {
  get key() {
    return sessionStorage.getItem(KEY_NAME);
  },
  signIn(key) {
    sessionStorage.setItem(KEY_NAME, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY_NAME);
  },
};

/** An error answer of the API (problem+json), with its code and detail. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `The service answered ${status}.`);
    this.status = status;
    this.code = problem?.code;
    this.errors = problem?.errors ?? [];
  }
}

const unauthorizedListeners = new Set();
/** Called when the service refuses the key (revoked while signed in, say). */
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** `body` is sent as JSON; `csv` (text) as text/csv, for the suppression import. */
export async function api(path, { method = 'GET', body, csv, key = session.key } = {}) {
  const headers = { accept: 'application/json' };
  if (key) headers['x-api-key'] = key;
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (csv !== undefined) headers['content-type'] = 'text/csv';
  let response;
  try {
    response = await fetch(`/api/v1/public${path}`, { method, headers, body: csv ?? (body === undefined ? undefined : JSON.stringify(body)), cache: 'no-store' });
  } catch {
    throw new ApiError(0, { detail: 'The service could not be reached.' });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, value);
    if (response.status === 401 && key === session.key) for (const listener of unauthorizedListeners) listener(error);
    throw error;
  }
  return value;
}

/**
 * The organization's event stream, read with fetch() so the key goes in a header (EventSource
 * cannot send one). On any break it reconnects, sending the id of the last event it got as
 * Last-Event-ID, so the service resends whatever happened meanwhile: no event is lost. Run events
 * go to `subscribe` listeners, webhook delivery attempts to `subscribeDeliveries` ones, campaign
 * state changes (`campaign.<change>`) to `subscribeCampaigns` ones.
 */
export class EventStream {
  constructor() {
    this.listeners = new Set();
    this.deliveryListeners = new Set();
    this.campaignListeners = new Set();
    this.statusListeners = new Set();
    this.lastEventId = undefined;
    this.status = 'connecting';
    this.stopped = false;
    this.aborter = undefined;
    this.retryMs = 500;
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  subscribeDeliveries(listener) {
    this.deliveryListeners.add(listener);
    return () => this.deliveryListeners.delete(listener);
  }

  subscribeCampaigns(listener) {
    this.campaignListeners.add(listener);
    return () => this.campaignListeners.delete(listener);
  }

  onStatus(listener) {
    this.statusListeners.add(listener);
    listener(this.status);
    return () => this.statusListeners.delete(listener);
  }

  setStatus(status) {
    this.status = status;
    for (const listener of this.statusListeners) listener(status);
  }

  start() {
    this.stopped = false;
    void this.run();
  }

  stop() {
    this.stopped = true;
    this.aborter?.abort();
  }

  async run() {
    while (!this.stopped) {
      try {
        await this.readOnce();
      } catch {
        // A network error, a node going away: reconnect below.
      }
      if (this.stopped) return;
      this.setStatus('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, this.retryMs));
      this.retryMs = Math.min(this.retryMs * 2, 5_000);
    }
  }

  async readOnce() {
    this.aborter = new AbortController();
    const headers = { 'x-api-key': session.key ?? '', accept: 'text/event-stream' };
    if (this.lastEventId !== undefined) headers['last-event-id'] = String(this.lastEventId);
    const response = await fetch('/api/v1/public/stream', { headers, signal: this.aborter.signal, cache: 'no-store' });
    if (response.status === 401) {
      this.stopped = true;
      for (const listener of unauthorizedListeners) listener(new ApiError(401, null));
      return;
    }
    if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        this.dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  /** One message of the text/event-stream format. */
  dispatch(block) {
    let id;
    let event = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (id !== undefined && /^\d+$/.test(id)) this.lastEventId = Number(id);
    if (event === 'ready') {
      this.retryMs = 500;
      this.setStatus('live');
      return;
    }
    if (data.length === 0) return;
    const listeners = event === 'run' ? this.listeners : event === 'webhook.delivery' ? this.deliveryListeners : event.startsWith('campaign.') ? this.campaignListeners : undefined;
    if (!listeners) return;
    const message = JSON.parse(data.join('\n'));
    for (const listener of listeners) listener(message);
  }
}
