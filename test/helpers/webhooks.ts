// A local webhook receiver that records every request, answers as each test scripts it, and can
// be stopped and started on the same port. Signatures are checked with the standardwebhooks package.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { Webhook } from 'standardwebhooks';

export interface ReceivedMessage {
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> & { run?: Record<string, unknown>; event?: { seq: number; type: string; at: string } } };
  at: number;
}

/** What the receiver answers a request with: a status (and body), decided per request. */
export type Answer = (message: ReceivedMessage, index: number) => { status: number; body?: string } | Promise<{ status: number; body?: string }>;

export class Receiver {
  readonly received: ReceivedMessage[] = [];
  private server: Server | undefined;
  port = 0;
  answer: Answer = () => ({ status: 204 });

  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const message: ReceivedMessage = { headers: req.headers, body, json: JSON.parse(body) as ReceivedMessage['json'], at: Date.now() };
        this.received.push(message);
        void Promise.resolve(this.answer(message, this.received.length - 1)).then((a) => {
          res.statusCode = a.status;
          res.end(a.body ?? '');
        });
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Verifies a message's signature with the standardwebhooks package (not Dialtone's code); throws if invalid. */
  static verify(secret: string, message: ReceivedMessage): unknown {
    return new Webhook(secret).verify(message.body, message.headers as Record<string, string>);
  }

  async waitFor(predicate: (received: ReceivedMessage[]) => boolean, timeoutMs = 10_000): Promise<ReceivedMessage[]> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      if (Date.now() > deadline) throw new Error(`receiver: condition not met after ${timeoutMs} ms; got ${this.received.length} messages: ${this.received.map((m) => m.json.type).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return this.received;
  }
}

export async function startReceiver(t: TestContext): Promise<Receiver> {
  const receiver = await new Receiver().start();
  t.after(() => receiver.stop());
  return receiver;
}

/** Webhook settings for tests: private addresses allowed (the receiver is on loopback), quick polling. */
export const WEBHOOK_TEST_ENV: Record<string, string> = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_POLL_INTERVAL_MS: '20',
  WEBHOOK_TIMEOUT_MS: '2000',
};
