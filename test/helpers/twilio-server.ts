// A local HTTP server speaking Twilio's documented REST wire format for Calls: form-encoded POSTs
// with HTTP Basic auth to /2010-04-01/Accounts/{AccountSid}/Calls.json (create) and
// /Calls/{CallSid}.json (update), JSON call resources back, JSON errors `{code, message,
// more_info, status}`. Tests point TWILIO_API_BASE_URL at it; the provider's code path is the
// production one. It also sends status callbacks the way Twilio does: form-encoded and signed with
// the account's auth token by Twilio's published algorithm (the SDK's own implementation).
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import type { FastifyInstance } from 'fastify';
import twilio from 'twilio';

export const ACCOUNT_SID = `AC${'a1'.repeat(16)}`;
export const AUTH_TOKEN = 'test-auth-token-0123456789abcdef';
export const PUBLIC_BASE_URL = 'https://dialtone.example.test';

export interface RecordedRequest {
  method: string;
  path: string;
  /** Basic auth user and password, as Twilio would authenticate them. */
  auth: [string, string] | undefined;
  contentType: string | undefined;
  form: URLSearchParams;
}

export interface TwilioError {
  status: number;
  code: number;
  message: string;
}

export interface FakeTwilio {
  baseUrl: string;
  requests: RecordedRequest[];
  /** Makes the next Calls.json create fail with this Twilio error. */
  failNextCreate(error: TwilioError): void;
  /** Makes the next Calls.json create answer this status and body, as a gateway or proxy in front of Twilio might. */
  answerNextCreate(status: number, contentType: string, body: string): void;
  creates(): RecordedRequest[];
  updates(): RecordedRequest[];
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => resolve(body));
  });
}

export async function startFakeTwilio(t: TestContext, credentials: { user: string; password: string } = { user: ACCOUNT_SID, password: AUTH_TOKEN }): Promise<FakeTwilio> {
  const requests: RecordedRequest[] = [];
  let nextFailure: TwilioError | undefined;
  let nextRaw: { status: number; contentType: string; body: string } | undefined;
  const server = createServer(async (request, response) => {
    const body = await readBody(request);
    const header = request.headers.authorization ?? '';
    const decoded = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString() : undefined;
    const auth = decoded ? (decoded.split(':', 2) as [string, string]) : undefined;
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    const recorded: RecordedRequest = { method: request.method ?? '', path, auth, contentType: request.headers['content-type'], form: new URLSearchParams(body) };
    requests.push(recorded);
    const send = (status: number, payload: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(payload));
    };
    const error = (e: TwilioError) => send(e.status, { code: e.code, message: e.message, more_info: `https://www.twilio.com/docs/errors/${e.code}`, status: e.status });
    if (!auth || auth[0] !== credentials.user || auth[1] !== credentials.password) return error({ status: 401, code: 20003, message: 'Authenticate' });
    const create = /^\/2010-04-01\/Accounts\/(AC[0-9a-f]{32})\/Calls\.json$/.exec(path);
    const update = /^\/2010-04-01\/Accounts\/(AC[0-9a-f]{32})\/Calls\/(CA[0-9a-f]{32})\.json$/.exec(path);
    if (request.method === 'POST' && create) {
      if (nextRaw) {
        const raw = nextRaw;
        nextRaw = undefined;
        response.writeHead(raw.status, { 'content-type': raw.contentType });
        return response.end(raw.body);
      }
      if (nextFailure) {
        const failure = nextFailure;
        nextFailure = undefined;
        return error(failure);
      }
      const form = recorded.form;
      return send(201, { sid: `CA${randomBytes(16).toString('hex')}`, account_sid: create[1], to: form.get('To'), from: form.get('From'), status: 'queued', direction: 'outbound-api' });
    }
    if (request.method === 'POST' && update) {
      return send(200, { sid: update[2], account_sid: update[1], status: recorded.form.get('Status') ?? 'in-progress' });
    }
    return error({ status: 404, code: 20404, message: 'The requested resource was not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    failNextCreate: (e) => (nextFailure = e),
    answerNextCreate: (status, contentType, body) => (nextRaw = { status, contentType, body }),
    creates: () => requests.filter((r) => r.path.endsWith('/Calls.json')),
    updates: () => requests.filter((r) => /\/Calls\/CA[0-9a-f]+\.json$/.test(r.path)),
  };
}

/** Posts a Twilio callback to the app, signed like Twilio signs it unless told otherwise. */
export function sendCallback(
  app: FastifyInstance,
  path: string,
  params: Record<string, string>,
  options: { signature?: string; authToken?: string } = {},
) {
  const form = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', Direction: 'outbound-api', ...params };
  const signature = options.signature ?? twilio.getExpectedTwilioSignature(options.authToken ?? AUTH_TOKEN, `${PUBLIC_BASE_URL}${path}`, form);
  return app.inject({
    method: 'POST',
    url: path,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
    payload: new URLSearchParams(form).toString(),
  });
}
