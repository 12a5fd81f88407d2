// A Server-Sent Events client for tests: reads GET /api/v1/public/stream over a real socket with
// the key in X-API-Key, keeps every message and comment, and can stop reading (a slow reader).
import { request, type IncomingMessage } from 'node:http';

export interface SseMessage {
  id: number | undefined;
  event: string | undefined;
  data: unknown;
}

export interface DeliveryEventData {
  id: number;
  delivery_id: number;
  endpoint_id: number;
  message_id: string;
  event_type: string;
  run_id: number | null;
  attempt: number;
  status: string;
  http_status: number | null;
  error: string | null;
  next_attempt_at: string | null;
  endpoint_disabled: string | null;
  at: string;
}

export interface CampaignEventData {
  id: number;
  type: string;
  campaign: { id: number; name: string; state: string; paused_reason: string | null };
  at: string;
}

export class SseClient {
  readonly messages: SseMessage[] = [];
  readonly comments: string[] = [];
  readonly ended: Promise<void>;
  private buffer = '';
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly response: IncomingMessage,
    readonly status: number,
  ) {
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => this.take(chunk));
    this.ended = new Promise((resolve) => {
      response.on('close', () => {
        resolve();
        this.notify();
      });
      response.on('error', () => resolve());
    });
  }

  /** Opens the stream; resolves once the answer's head has arrived. */
  static open(baseUrl: string, key: string, options: { lastEventId?: number; query?: string } = {}): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { 'x-api-key': key, accept: 'text/event-stream' };
      if (options.lastEventId !== undefined) headers['last-event-id'] = String(options.lastEventId);
      const req = request(`${baseUrl}/api/v1/public/stream${options.query ?? ''}`, { headers }, (response) => resolve(new SseClient(response, response.statusCode ?? 0)));
      req.on('error', reject);
      req.end();
    });
  }

  /** The `run` messages' data, in order. */
  get runEvents(): { id: number; run_id: number; run_name: string; campaign_id: number | null; seq: number; type: string }[] {
    return this.messages.filter((m) => m.event === 'run').map((m) => m.data as { id: number; run_id: number; run_name: string; campaign_id: number | null; seq: number; type: string });
  }

  /** The `webhook.delivery` messages' data, in order. */
  get deliveryEvents(): DeliveryEventData[] {
    return this.messages.filter((m) => m.event === 'webhook.delivery').map((m) => m.data as DeliveryEventData);
  }

  /** The `campaign.<change>` messages' data, in order. */
  get campaignEvents(): CampaignEventData[] {
    return this.messages.filter((m) => m.event?.startsWith('campaign.')).map((m) => m.data as CampaignEventData);
  }

  get lastId(): number | undefined {
    return this.messages.findLast((m) => m.id !== undefined)?.id;
  }

  async waitFor(done: () => boolean, timeoutMs = 5_000, what = 'the stream to show it'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.messages).slice(0, 2000)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 50));
        this.waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  pause(): void {
    this.response.pause();
  }

  resume(): void {
    this.response.resume();
  }

  close(): void {
    this.response.destroy();
  }

  private take(chunk: string): void {
    this.buffer += chunk;
    for (let end = this.buffer.indexOf('\n\n'); end >= 0; end = this.buffer.indexOf('\n\n')) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const message: SseMessage = { id: undefined, event: undefined, data: undefined };
      let isComment = true;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.comments.push(line.slice(1).trim());
          continue;
        }
        isComment = false;
        const colon = line.indexOf(':');
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') message.id = Number(value);
        else if (field === 'event') message.event = value;
        else if (field === 'data') message.data = JSON.parse(value);
      }
      if (!isComment) this.messages.push(message);
    }
    this.notify();
  }

  private notify(): void {
    for (const waiter of this.waiters) waiter();
    this.waiters.clear();
  }
}
