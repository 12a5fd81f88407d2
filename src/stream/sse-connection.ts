// One Server-Sent Events connection (the wire format of the WHATWG HTML "server-sent events"
// section: `id:`, `event:`, `data:` lines, a blank line ends a message, a line starting with `:`
// is a comment). Hand-written rather than a plugin: the format is a few lines, and what matters
// here (a byte bound per connection, disconnecting a slow reader, resuming by id) is this
// service's own policy, which the SSE plugins for Fastify do not offer.
import type { ServerResponse } from 'node:http';

export interface SseMessage {
  id?: number;
  event?: string;
  data: unknown;
}

export interface SseConnectionOptions {
  /** Bytes written but not yet taken by the reader above which the connection is closed. */
  maxBufferedBytes: number;
  heartbeatMs: number;
  /**
   * Called once, when the connection ends for any reason, even when the client had already gone
   * before the connection was made (then from the constructor, hence the connection as argument).
   */
  onClose: (reason: SseCloseReason, connection: SseConnection) => void;
}

export type SseCloseReason = 'client' | 'slow_reader' | 'server';

/** The format's own encoding of one message; `data` is JSON, so it holds no newline. */
export function encodeSse(message: SseMessage): string {
  const lines: string[] = [];
  if (message.id !== undefined) lines.push(`id: ${message.id}`);
  if (message.event !== undefined) lines.push(`event: ${message.event}`);
  lines.push(`data: ${JSON.stringify(message.data)}`);
  return `${lines.join('\n')}\n\n`;
}

export class SseConnection {
  private readonly heartbeat: ReturnType<typeof setInterval>;
  private closed = false;
  private readonly ended: Promise<void>;
  private markEnded: () => void = () => undefined;

  constructor(
    private readonly response: ServerResponse,
    private readonly options: SseConnectionOptions,
  ) {
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), options.heartbeatMs);
    // The heartbeat alone must not keep a process alive that is otherwise done.
    this.heartbeat.unref();
    response.on('close', () => this.end('client'));
    // A client that left while its request was still being authenticated or rate-limited closed
    // the response before this listener existed, and 'close' is not emitted twice: without this
    // check the connection (and the slot it holds) would stay open for good.
    if (response.closed || response.destroyed) this.end('client');
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Bytes the reader has not taken yet (Node's buffer; the kernel's socket buffer comes before it). */
  get bufferedBytes(): number {
    return this.response.writableLength;
  }

  send(message: SseMessage): boolean {
    return this.write(encodeSse(message));
  }

  /**
   * Sends at the reader's pace (a resuming stream's backlog, read from the store page by page):
   * past half the bound, resolves only once this message has been handed to the socket, so the
   * backlog never piles up in memory and never trips the slow-reader bound.
   */
  sendPaced(message: SseMessage): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    const written = new Promise<boolean>((resolve) => {
      const flushed = this.response.write(encodeSse(message), () => resolve(!this.closed));
      if (flushed && this.response.writableLength <= this.options.maxBufferedBytes / 2) resolve(true);
    });
    return Promise.race([written, this.ended.then(() => false)]);
  }

  /**
   * Writes unless closed. A reader that leaves more than maxBufferedBytes untaken is disconnected
   * rather than buffered for: it reconnects with Last-Event-ID and reads its backlog from the store.
   */
  private write(text: string): boolean {
    if (this.closed) return false;
    this.response.write(text);
    if (this.response.writableLength > this.options.maxBufferedBytes) {
      this.end('slow_reader');
      return false;
    }
    return true;
  }

  end(reason: SseCloseReason): void {
    if (this.closed) return;
    this.closed = true;
    this.markEnded();
    clearInterval(this.heartbeat);
    if (reason === 'slow_reader') this.response.destroy();
    else this.response.end();
    this.options.onClose(reason, this);
  }
}
