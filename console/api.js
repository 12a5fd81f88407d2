// The console's only way to the service: the public API, same origin, with the API key in the
// X-API-Key header. The key lives in sessionStorage (gone when the tab closes) and is never put in
// a URL, a cookie or a log line. Every request, the event stream included, goes through
// @dialtone/client (its `core` entry: no webhook verification, so nothing CommonJS), loaded as it
// is built through index.html's import map (routes/console.ts serves it): the console speaks the
// API the way the client everyone else uses does, and finds what breaks in it first.
import { createDialtoneCore, DialtoneApiError } from '@dialtone/client/core';
/** @import { DialtoneCore } from '@dialtone/client/core' */
/** @import { CampaignMessage, DeliveryMessage, Problem, ProblemError, ResetMessage, RunMessage } from './types.js' */
const KEY_NAME = 'dialtone.apiKey';

export const session = {
  get key() {
    return sessionStorage.getItem(KEY_NAME);
  },
  /** @param {string} key */
  signIn(key) {
    sessionStorage.setItem(KEY_NAME, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY_NAME);
  },
};

/** An error answer of the API (problem+json), with its code and detail. */
export class ApiError extends Error {
  /**
   * @param {number} status 0 when no answer came
   * @param {Problem | null} problem
   */
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `The service answered ${status}.`);
    this.status = status;
    /** @type {string | undefined} */
    this.code = problem?.code;
    /** @type {ProblemError[]} */
    this.errors = problem?.errors ?? [];
  }
}

/** @type {Set<(error: ApiError) => void>} */
const unauthorizedListeners = new Set();
/**
 * Called when the service refuses the key (revoked while signed in, say).
 * @param {(error: ApiError) => void} listener
 * @returns {() => void} the unsubscribe
 */
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => void unauthorizedListeners.delete(listener);
}

/**
 * @typedef {object} ApiOptions
 * @property {'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'} [method]
 * @property {unknown} [body] sent as JSON
 * @property {string} [csv] sent as text/csv (the imports)
 * @property {string | null} [key] the API key; the session's by default
 */

/** @type {{ key: string, client: DialtoneCore } | undefined} */
let lastClient;

/**
 * The client for one key, kept while the key is the one used (the session's, nearly always). Its
 * retries are off: the console shows a refusal at once rather than waiting out a Retry-After in
 * front of the operator, and the one reader that should wait (export.js) retries itself.
 * @param {string} key
 */
function clientFor(key) {
  if (lastClient?.key !== key) lastClient = { key, client: createDialtoneCore({ baseUrl: location.origin, apiKey: key, retry: false }) };
  return lastClient.client;
}

/**
 * openapi-fetch's call by method and path, untyped: `path` comes with its query already in it (the
 * pages build it), which the typed methods cannot take. It still goes through the client's fetch,
 * headers and answer parsing.
 * @typedef {(method: string, url: string, init: Record<string, unknown>) => Promise<{ data?: unknown, error?: unknown, response: Response }>} UntypedRequest
 */

/**
 * The answer of a public API operation, as JSON (null for 204); a refusal throws an ApiError. The
 * caller names what it expects (`T`): the types of types.js, from the OpenAPI document.
 * @template [T=unknown]
 * @param {string} path under /api/v1/public
 * @param {ApiOptions} [options]
 * @returns {Promise<T>}
 */
export async function api(path, { method = 'GET', body, csv, key = session.key } = {}) {
  const client = clientFor(key ?? '');
  const request = /** @type {UntypedRequest} */ (/** @type {unknown} */ (client.api.request));
  /** @type {Record<string, string | null>} */
  const headers = { accept: 'application/json' };
  // No key: no X-API-Key header at all (the client would send an empty one).
  if (!key) headers['x-api-key'] = null;
  /** @type {Record<string, unknown>} */
  const init = { headers, cache: 'no-store' };
  if (csv !== undefined) Object.assign(init, { body: csv, bodySerializer: (/** @type {string} */ text) => text, headers: { ...headers, 'content-type': 'text/csv' } });
  else if (body !== undefined) init.body = body;
  /** @type {{ data?: unknown, error?: unknown, response: Response }} */
  let answer;
  try {
    answer = await request(method, `/api/v1/public${path}`, init);
  } catch {
    throw new ApiError(0, { detail: 'The service could not be reached.' });
  }
  const { data, error, response } = answer;
  if (!response.ok) {
    // openapi-fetch gives the body parsed when it is JSON, else as text: only JSON is a problem.
    const problem = typeof error === 'object' && error !== null ? /** @type {Problem} */ (error) : null;
    const refusal = new ApiError(response.status, problem);
    if (response.status === 401 && key === session.key) for (const listener of unauthorizedListeners) listener(refusal);
    throw refusal;
  }
  // 204, or an empty body: openapi-fetch answers no data.
  return /** @type {T} */ (data ?? null);
}

/**
 * Tabs of one browser signed in with one key share one stream. Chromium opens at most six HTTP/1.1
 * connections to a host, and a stream holds one for as long as the tab is open: with one stream per
 * tab, a seventh tab could not even sign in. So the tabs elect a leader with the Web Locks API (the
 * lock is held for as long as the leader's tab runs, and given to the next tab waiting for it when
 * that tab closes or crashes), the leader alone reads the stream, and it passes every message to the
 * other tabs on a BroadcastChannel. A tab that takes over resumes from the last id it was passed,
 * so the handover loses nothing. Without either API (a page that is not a secure context has no
 * navigator.locks) each tab reads its own stream, as before.
 */
const SHARING = typeof BroadcastChannel === 'function' && typeof navigator !== 'undefined' && Boolean(navigator.locks);

/**
 * The name of one key's lock and channel. Not the key itself: lock and channel names show in the
 * browser's developer tools. Two 32-bit FNV-1a hashes with different offsets (64 bits), rather than
 * SHA-256, because crypto.subtle is missing where the console is not a secure context; the name
 * never leaves the browser, so it needs to tell keys apart, not to resist an attacker.
 * @param {string} key
 */
function sharedStreamName(key) {
  /** @param {number} offset */
  const fnv = (offset) => {
    let hash = offset;
    for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0;
    return hash.toString(16).padStart(8, '0');
  };
  return `dialtone.stream.${fnv(0x811c9dc5)}${fnv(0x050c5d1f)}`;
}

/** @typedef {'connecting' | 'live' | 'reconnecting'} StreamStatus */
/** @typedef {'leader' | 'follower' | 'own'} StreamRole */
/**
 * What the tabs of one key say to each other on their channel.
 * @typedef {{ type: 'hello' }
 *   | { type: 'status', status: StreamStatus, lastEventId: number | undefined }
 *   | { type: 'message', id: number | undefined, event: string, data: unknown }
 *   | { type: 'unauthorized' }} TabMessage
 */

/**
 * Listeners of one kind, and the function that adds one and returns its removal.
 * @template T
 */
class Listeners {
  constructor() {
    /** @type {Set<(value: T) => void>} */
    this.set = new Set();
  }

  /**
   * @param {(value: T) => void} listener
   * @returns {() => void}
   */
  add(listener) {
    this.set.add(listener);
    return () => void this.set.delete(listener);
  }

  /** @param {T} value */
  emit(value) {
    for (const listener of this.set) listener(value);
  }
}

/**
 * The organization's event stream, read by the client's stream reader (with fetch(), so the key
 * goes in a header: EventSource cannot send one). On any break it reconnects, sending the id of the last event it got as
 * Last-Event-ID, so the service resends whatever happened meanwhile: no event is lost. Run events
 * go to `subscribe` listeners, webhook delivery attempts to `subscribeDeliveries` ones, campaign
 * state changes (`campaign.<change>`) to `subscribeCampaigns` ones, and a `reset` (the service no
 * longer knows the last id: its database was restored) to `subscribeResets` ones, which read afresh.
 * Shared between the tabs of one key (above); `role` says whether this tab reads it (`leader`),
 * is passed it (`follower`) or reads its own (`own`).
 */
export class EventStream {
  constructor() {
    /** @type {Listeners<RunMessage>} */
    this.listeners = new Listeners();
    /** @type {Listeners<DeliveryMessage>} */
    this.deliveryListeners = new Listeners();
    /** @type {Listeners<CampaignMessage>} */
    this.campaignListeners = new Listeners();
    /** @type {Listeners<ResetMessage>} */
    this.resetListeners = new Listeners();
    /** @type {Listeners<StreamStatus>} */
    this.statusListeners = new Listeners();
    /** @type {Listeners<StreamRole | undefined>} */
    this.roleListeners = new Listeners();
    /** @type {number | undefined} */
    this.lastEventId = undefined;
    /** @type {StreamStatus} */
    this.status = 'connecting';
    /** @type {StreamRole | undefined} */
    this.role = undefined;
    this.stopped = false;
    /** @type {AbortController | undefined} */
    this.aborter = undefined;
    /** @type {BroadcastChannel | undefined} */
    this.channel = undefined;
    /** @type {AbortController | undefined} */
    this.lockAborter = undefined;
    this.retryMs = 500;
  }

  /** @param {(message: RunMessage) => void} listener */
  subscribe(listener) {
    return this.listeners.add(listener);
  }

  /** @param {(message: DeliveryMessage) => void} listener */
  subscribeDeliveries(listener) {
    return this.deliveryListeners.add(listener);
  }

  /** @param {(message: CampaignMessage) => void} listener */
  subscribeCampaigns(listener) {
    return this.campaignListeners.add(listener);
  }

  /** @param {(message: ResetMessage) => void} listener */
  subscribeResets(listener) {
    return this.resetListeners.add(listener);
  }

  /** @param {(status: StreamStatus) => void} listener */
  onStatus(listener) {
    listener(this.status);
    return this.statusListeners.add(listener);
  }

  /** @param {(role: StreamRole | undefined) => void} listener */
  onRole(listener) {
    listener(this.role);
    return this.roleListeners.add(listener);
  }

  /** @param {TabMessage} message */
  post(message) {
    this.channel?.postMessage(message);
  }

  /** @param {StreamStatus} status */
  setStatus(status) {
    this.status = status;
    this.statusListeners.emit(status);
    if (this.role === 'leader') this.post({ type: 'status', status, lastEventId: this.lastEventId });
  }

  /** @param {StreamRole} role */
  setRole(role) {
    this.role = role;
    this.roleListeners.emit(role);
  }

  start() {
    this.stopped = false;
    if (!SHARING) {
      this.setRole('own');
      void this.run();
      return;
    }
    const name = sharedStreamName(session.key ?? '');
    this.channel = new BroadcastChannel(name);
    this.channel.onmessage = (event) => this.fromLeader(event.data);
    this.setRole('follower');
    // Asks a leader already reading for its status and last id.
    this.post({ type: 'hello' });
    this.lockAborter = new AbortController();
    navigator.locks
      .request(name, { signal: this.lockAborter.signal }, async () => {
        if (this.stopped) return;
        this.setRole('leader');
        // Held until this tab stops reading: signed out, or closed (then the browser frees it).
        await this.run();
      })
      .catch(() => {
        // Stopped while waiting for the lock (AbortError): nothing to do.
      });
  }

  stop() {
    this.stopped = true;
    this.aborter?.abort();
    this.lockAborter?.abort();
    this.channel?.close();
    this.channel = undefined;
  }

  /**
   * What the leader passes on, as a follower takes it; the leader ignores the others' hellos but answers them.
   * @param {TabMessage} message
   */
  fromLeader(message) {
    if (this.role === 'leader') {
      if (message.type === 'hello') this.post({ type: 'status', status: this.status, lastEventId: this.lastEventId });
      return;
    }
    if (message.type === 'status') {
      if (message.lastEventId !== undefined) this.lastEventId = message.lastEventId;
      this.setStatus(message.status);
    } else if (message.type === 'message') {
      this.handle(message.id, message.event, message.data);
    } else if (message.type === 'unauthorized') {
      for (const listener of unauthorizedListeners) listener(new ApiError(401, null));
    }
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

  /**
   * One connection of the stream, through the client's reader (reconnect: false: run() above
   * reconnects, showing "reconnecting" and backing off, and resumes from lastEventId).
   */
  async readOnce() {
    this.aborter = new AbortController();
    const messages = clientFor(session.key ?? '').stream.events({
      signal: this.aborter.signal,
      reconnect: false,
      ...(this.lastEventId !== undefined ? { lastEventId: String(this.lastEventId) } : {}),
    });
    try {
      for await (const message of messages) this.dispatch(message);
    } catch (error) {
      if (!(error instanceof DialtoneApiError && error.status === 401)) throw error;
      this.stopped = true;
      this.post({ type: 'unauthorized' });
      for (const listener of unauthorizedListeners) listener(new ApiError(401, null));
    }
  }

  /**
   * One message of the stream, as read by this tab: handled here and passed to the other tabs.
   * @param {{ id: string, event: string, data: unknown }} message
   */
  dispatch({ id, event, data }) {
    const numericId = /^\d+$/.test(id) ? Number(id) : undefined;
    if (this.role === 'leader') this.post({ type: 'message', id: numericId, event, data });
    if (event === 'ready') this.retryMs = 500;
    this.handle(numericId, event, data);
  }

  /**
   * One message, read here or passed on by the leader. Its data is the service's JSON for that
   * event (types.js), parsed by the client and trusted as such: it comes from the same service the
   * page does.
   * @param {number | undefined} id
   * @param {string} event
   * @param {unknown} data
   */
  handle(id, event, data) {
    if (id !== undefined) this.lastEventId = id;
    if (event === 'ready') {
      if (this.role !== 'follower') this.setStatus('live');
      return;
    }
    if (data === undefined) return;
    if (event === 'reset') this.resetListeners.emit(/** @type {ResetMessage} */ (data));
    else if (event === 'run') this.listeners.emit(/** @type {RunMessage} */ (data));
    else if (event === 'webhook.delivery') this.deliveryListeners.emit(/** @type {DeliveryMessage} */ (data));
    else if (event.startsWith('campaign.')) this.campaignListeners.emit(/** @type {CampaignMessage} */ (data));
  }
}
