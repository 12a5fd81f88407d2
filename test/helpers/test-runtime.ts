// An agent runtime for the media tests: a WebSocket server (the `ws` package) that Dialtone's media
// bridge connects to as it would to Twilio's Media Streams client. It keeps every message of each
// stream, checks each against Twilio's documented shapes (media-streams-fixture.ts) as it arrives,
// and sends audio, marks and clear the way a runtime written for Twilio does.
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { assertDocumentedMessage, FROM_TWILIO, TO_TWILIO } from './media-streams-fixture.js';
import { scaledTimeout } from './timeouts.js';

export interface StreamMessage {
  event: string;
  sequenceNumber?: string;
  streamSid?: string;
  start?: { streamSid: string; callSid: string; accountSid: string; tracks: string[]; customParameters: Record<string, string> };
  media?: { track: string; chunk: string; timestamp: string; payload: string };
  mark?: { name: string };
  dtmf?: { digit: string };
}

export class RuntimeStream {
  readonly messages: StreamMessage[] = [];
  /** When each message arrived (performance.now()), by index. */
  readonly arrivals: number[] = [];
  /** Shape problems found (checked on arrival; the test asserts the list is empty). */
  readonly problems: string[] = [];
  closed = false;

  constructor(readonly socket: WebSocket) {}

  get start(): NonNullable<StreamMessage['start']> | undefined {
    return this.messages.find((m) => m.event === 'start')?.start;
  }

  get media(): NonNullable<StreamMessage['media']>[] {
    return this.messages.flatMap((m) => (m.event === 'media' && m.media ? [m.media] : []));
  }

  /** The callee's audio received so far, μ-law bytes in arrival order. */
  audio(): Buffer {
    return Buffer.concat(this.media.map((m) => Buffer.from(m.payload, 'base64')));
  }

  private out(message: Record<string, unknown>): void {
    assertDocumentedMessage(TO_TWILIO, message);
    this.socket.send(JSON.stringify(message));
  }

  /** μ-law audio in chunks of `chunkBytes` (any size: the bridge re-cuts them into 20 ms frames). */
  play(mulaw: Buffer, chunkBytes: number): void {
    const streamSid = this.start?.streamSid ?? '';
    for (let offset = 0; offset < mulaw.length; offset += chunkBytes) {
      this.out({ event: 'media', streamSid, media: { payload: mulaw.subarray(offset, offset + chunkBytes).toString('base64') } });
    }
  }

  mark(name: string): void {
    this.out({ event: 'mark', streamSid: this.start?.streamSid ?? '', mark: { name } });
  }

  clear(): void {
    this.out({ event: 'clear', streamSid: this.start?.streamSid ?? '' });
  }

  /** Index of the first message matching `match`, once it has arrived. */
  async waitFor(what: string, match: (message: StreamMessage) => boolean, timeoutMs = 15_000): Promise<number> {
    const deadline = Date.now() + scaledTimeout(timeoutMs);
    for (;;) {
      const index = this.messages.findIndex(match);
      if (index >= 0) return index;
      if (Date.now() > deadline) throw new Error(`the runtime never received ${what}; it has: ${this.messages.map((m) => m.event).join(' ').slice(-2000)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async waitForClose(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + scaledTimeout(timeoutMs);
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('the media stream was never closed');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

export interface TestRuntime {
  url: string;
  streams: RuntimeStream[];
  /** The `n`th stream (from 0), once it has connected and sent its `start`. */
  stream(n: number, timeoutMs?: number): Promise<RuntimeStream>;
}

export async function startTestRuntime(t: TestContext, host = '127.0.0.1'): Promise<TestRuntime> {
  const server = new WebSocketServer({ host, port: 0 });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  t.after(() => new Promise<void>((resolve) => {
    for (const client of server.clients) client.terminate();
    server.close(() => resolve());
  }));
  const streams: RuntimeStream[] = [];
  server.on('connection', (socket) => {
    const stream = new RuntimeStream(socket);
    streams.push(stream);
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as StreamMessage;
      try {
        assertDocumentedMessage(FROM_TWILIO, message);
      } catch (error) {
        stream.problems.push((error as Error).message);
      }
      stream.messages.push(message);
      stream.arrivals.push(performance.now());
    });
    socket.on('close', () => (stream.closed = true));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://${host}:${port}/media`,
    streams,
    stream: async (n, timeoutMs = 15_000) => {
      const deadline = Date.now() + scaledTimeout(timeoutMs);
      for (;;) {
        const stream = streams[n];
        if (stream?.start) return stream;
        if (Date.now() > deadline) throw new Error(`stream ${n} never started (${streams.length} connected)`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
}
