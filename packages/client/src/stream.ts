// The organization's live event stream (GET /api/v1/public/stream, Server-Sent Events) as an async
// iterator that resumes: it reads the stream with fetch() (EventSource cannot send X-API-Key), and
// when the connection ends for any reason other than the caller stopping, reconnects with
// Last-Event-ID set to the last id it yielded, so no event is lost or repeated across a node
// restart (docs/console.md, "The event stream"). Parsing is eventsource-parser's, a small, widely
// used ESM parser with no Node imports (loaded as it is in the browser test).
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { errorFromResponse, retryAfterSeconds } from './errors.js';

/** A run event: the state a run entered, or an agent's own event. */
export interface RunStreamData {
  id: number;
  run_id: number;
  run_name: string;
  campaign_id: number | null;
  seq: number;
  type: string;
  at: string;
  data: Record<string, unknown>;
}

/** One message of the stream. `event` says which: `ready`, `reset`, `run`, `campaign.<change>`, `webhook.delivery`. */
export type StreamMessage =
  | { event: 'run'; id: string; data: RunStreamData }
  | { event: 'ready' | 'reset'; id: string; data: Record<string, unknown> }
  | { event: `campaign.${string}` | 'webhook.delivery'; id: string; data: Record<string, unknown> };

export interface StreamOptions {
  /** Resume after this event id (a message's `id`); without it the stream starts from now. */
  lastEventId?: string;
  /** Stops the iteration (the iterator then ends without an error). */
  signal?: AbortSignal;
  /** Wait before reconnecting when the service names none (SSE `retry:`); default 1000 ms. */
  reconnectDelayMs?: number;
  /**
   * `false`: read one connection only. The iterator ends when the service closes it, and throws
   * when it cannot connect, is refused (429 and 503 included) or the connection breaks, so a caller
   * with its own policy (the console shows "reconnecting" and backs off) reconnects itself, passing
   * the last id as `lastEventId`. Default `true`: resumes on its own, as described above.
   */
  reconnect?: boolean;
}

interface StreamContext {
  baseUrl: string;
  headers: () => Record<string, string>;
  fetch: typeof fetch;
}

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

function toMessage(event: EventSourceMessage): StreamMessage | undefined {
  if (event.id === undefined || event.event === undefined) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(event.data);
  } catch {
    return undefined;
  }
  return { event: event.event, id: event.id, data } as StreamMessage;
}

export async function* streamEvents(context: StreamContext, options: StreamOptions = {}): AsyncGenerator<StreamMessage, void, undefined> {
  const { signal } = options;
  let lastEventId = options.lastEventId;
  let reconnectDelayMs = options.reconnectDelayMs ?? 1000;
  const reconnect = options.reconnect ?? true;
  while (!signal?.aborted) {
    const headers: Record<string, string> = { ...context.headers(), accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    let response: Response;
    try {
      response = await context.fetch(`${context.baseUrl}/api/v1/public/stream`, { headers, ...(signal ? { signal } : {}) });
    } catch (error) {
      if (signal?.aborted) return;
      if (!reconnect) throw error;
      // Unreachable for now (a node restarting): try again.
      await sleep(reconnectDelayMs, signal);
      continue;
    }
    if (reconnect && (response.status === 429 || response.status === 503)) {
      const wait = retryAfterSeconds(response.headers.get('retry-after'));
      await response.body?.cancel().catch(() => undefined);
      await sleep(wait !== undefined ? wait * 1000 : reconnectDelayMs, signal);
      continue;
    }
    if (!response.ok || response.body === null) {
      const text = await response.text().catch(() => '');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON: kept as text
      }
      throw errorFromResponse(response, body);
    }
    const pending: StreamMessage[] = [];
    const parser = createParser({
      onEvent: (event) => {
        const message = toMessage(event);
        if (message) pending.push(message);
      },
      onRetry: (ms) => {
        reconnectDelayMs = ms;
      },
    });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
        while (pending.length > 0) {
          const message = pending.shift() as StreamMessage;
          lastEventId = message.id;
          yield message;
        }
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (!reconnect) throw error;
      // The connection broke mid-stream: resume from the last id below.
    } finally {
      reader.releaseLock();
      await response.body.cancel().catch(() => undefined);
    }
    if (signal?.aborted || !reconnect) return;
    await sleep(reconnectDelayMs, signal);
  }
}
