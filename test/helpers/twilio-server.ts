// A local HTTP server speaking Twilio's documented REST wire format for Calls: form-encoded POSTs
// with HTTP Basic auth to /2010-04-01/Accounts/{AccountSid}/Calls.json (create) and
// /Calls/{CallSid}.json (update), GET /Calls/{CallSid}.json (fetch) and GET /Calls.json (list,
// filtered by To, From and StartTime> / StartTime>= / StartTime, paged with PageSize, Page and
// next_page_uri inside a `calls` page), JSON call resources back (dates in RFC 2822, as Twilio
// sends them), JSON errors `{code, message, more_info, status}`. Tests point TWILIO_API_BASE_URL at it; the provider's code path is the
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
  query: URLSearchParams;
  /** When it arrived (Date.now()). */
  at: number;
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

/** A call as the fake holds it. */
export interface FakeCall {
  sid: string;
  accountSid: string;
  to: string;
  from: string;
  status: string;
  createdAt: number;
  /** Answering-machine detection's verdict (AnsweredBy), once Twilio has one. */
  answeredBy?: string;
}

export interface FakeTwilio {
  baseUrl: string;
  requests: RecordedRequest[];
  /** Every call created, by sid. */
  calls: Map<string, FakeCall>;
  /** Sets what Twilio says of a call from now on (fetch and list). */
  setStatus(sid: string, status: string): void;
  /** Sets the call's answering-machine verdict (the resource's answered_by). */
  setAnsweredBy(sid: string, answeredBy: string): void;
  /** Once this many calls exist, a create places the call but its answer never comes (the caller's node dies waiting); undefined: answer all. */
  stallCreatesAfter(count: number | undefined): void;
  fetches(): RecordedRequest[];
  lists(): RecordedRequest[];
  /**
   * From now on a create is answered only after `delayMs` (undefined: at once). With `place: false`
   * Twilio places no call and its late answer is an error; otherwise the call exists from the start
   * (placed at once, as Twilio does, whatever becomes of the answer).
   */
  answerCreatesAfter(delayMs: number | undefined, options?: { place?: boolean }): void;
  /** How many creates have been answered (at once or late; a late answer counts when sent, even to a caller gone). */
  createsAnswered(): number;
  /** Makes the next Calls.json create fail with this Twilio error. */
  failNextCreate(error: TwilioError): void;
  /** Makes the next call update fail with this Twilio error. */
  failNextUpdate(error: TwilioError): void;
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
  const calls = new Map<string, FakeCall>();
  let stallAfter: number | undefined;
  let nextFailure: TwilioError | undefined;
  let nextUpdateFailure: TwilioError | undefined;
  let nextRaw: { status: number; contentType: string; body: string } | undefined;
  let slowCreates: { delayMs: number; place: boolean } | undefined;
  let createsAnswered = 0;
  const server = createServer(async (request, response) => {
    const body = await readBody(request);
    const header = request.headers.authorization ?? '';
    const decoded = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString() : undefined;
    const auth = decoded ? (decoded.split(':', 2) as [string, string]) : undefined;
    const parsedUrl = new URL(request.url ?? '/', 'http://x');
    const path = parsedUrl.pathname;
    const recorded: RecordedRequest = { method: request.method ?? '', at: Date.now(), path, query: parsedUrl.searchParams, auth, contentType: request.headers['content-type'], form: new URLSearchParams(body) };
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
      if (slowCreates) {
        const { delayMs, place } = slowCreates;
        const form = recorded.form;
        const call: FakeCall = { sid: `CA${randomBytes(16).toString('hex')}`, accountSid: create[1] ?? '', to: form.get('To') ?? '', from: form.get('From') ?? '', status: 'queued', createdAt: Date.now() };
        if (place) calls.set(call.sid, call);
        setTimeout(() => {
          // Counted when sent: the caller may have hung up on it already.
          createsAnswered++;
          if (place) send(201, resource(call));
          else error({ status: 503, code: 20500, message: 'Service Unavailable' });
        }, delayMs);
        return;
      }
      response.on('finish', () => createsAnswered++);
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
      const call: FakeCall = { sid: `CA${randomBytes(16).toString('hex')}`, accountSid: create[1] ?? '', to: form.get('To') ?? '', from: form.get('From') ?? '', status: 'queued', createdAt: Date.now() };
      const stall = stallAfter !== undefined && calls.size >= stallAfter;
      calls.set(call.sid, call);
      if (stall) return; // The call exists at Twilio; its answer never reaches the caller.
      return send(201, resource(call));
    }
    if (request.method === 'POST' && update) {
      if (nextUpdateFailure) {
        const failure = nextUpdateFailure;
        nextUpdateFailure = undefined;
        return error(failure);
      }
      const call = calls.get(update[2] ?? '');
      const status = recorded.form.get('Status');
      if (call && status) call.status = status === 'canceled' || status === 'completed' ? status : call.status;
      return send(200, call ? resource(call) : { sid: update[2], account_sid: update[1], status: status ?? 'in-progress' });
    }
    if (request.method === 'GET' && update) {
      const call = calls.get(update[2] ?? '');
      return call ? send(200, resource(call)) : error({ status: 404, code: 20404, message: 'The requested resource was not found' });
    }
    if (request.method === 'GET' && create) return send(200, listPage(create[1] ?? '', parsedUrl.searchParams));
    return error({ status: 404, code: 20404, message: 'The requested resource was not found' });
  });

  /** Twilio's call resource (the fields Dialtone and the SDK read, dates in RFC 2822 as Twilio writes them). */
  function resource(call: FakeCall) {
    const created = rfc2822(call.createdAt);
    return { sid: call.sid, account_sid: call.accountSid, to: call.to, from: call.from, status: call.status, answered_by: call.answeredBy ?? null, direction: 'outbound-api', date_created: created, date_updated: created, start_time: call.status === 'queued' ? null : created, end_time: null, uri: `/2010-04-01/Accounts/${call.accountSid}/Calls/${call.sid}.json` };
  }

  /**
   * One page of the list, filtered as Twilio filters: To, From, and the start time (a date or a
   * date-time); a call not yet started (queued) has no start time, so a start-time filter skips it.
   */
  function listPage(accountSid: string, query: URLSearchParams) {
    const after = query.get('StartTime>') ?? query.get('StartTime>=');
    const afterMs = after === null ? undefined : Date.parse(after.length === 10 ? `${after}T00:00:00Z` : after);
    // Newest first, as Twilio lists calls.
    const matching = [...calls.values()].reverse().filter(
      (call) => call.accountSid === accountSid && (!query.has('To') || call.to === query.get('To')) && (!query.has('From') || call.from === query.get('From')) && (afterMs === undefined || (call.status !== 'queued' && call.createdAt >= afterMs)),
    );
    const pageSize = Math.min(1000, Number(query.get('PageSize') ?? 50));
    const page = Number(query.get('Page') ?? 0);
    const slice = matching.slice(page * pageSize, (page + 1) * pageSize);
    const uri = (n: number) => {
      const q = new URLSearchParams(query);
      q.set('PageSize', String(pageSize));
      q.set('Page', String(n));
      return `/2010-04-01/Accounts/${accountSid}/Calls.json?${q.toString()}`;
    };
    const more = (page + 1) * pageSize < matching.length;
    return {
      calls: slice.map(resource),
      page,
      page_size: pageSize,
      start: page * pageSize,
      end: page * pageSize + Math.max(0, slice.length - 1),
      uri: uri(page),
      first_page_uri: uri(0),
      next_page_uri: more ? uri(page + 1) : null,
      previous_page_uri: page > 0 ? uri(page - 1) : null,
    };
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections(); // Stalled creates never answer by themselves.
  }));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    failNextCreate: (e) => (nextFailure = e),
    failNextUpdate: (e) => (nextUpdateFailure = e),
    answerNextCreate: (status, contentType, body) => (nextRaw = { status, contentType, body }),
    calls,
    setAnsweredBy: (sid, answeredBy) => {
      const call = calls.get(sid);
      if (call) call.answeredBy = answeredBy;
    },
    setStatus: (sid, status) => {
      const call = calls.get(sid);
      if (!call) throw new Error(`no call ${sid}`);
      call.status = status;
    },
    stallCreatesAfter: (count) => (stallAfter = count),
    answerCreatesAfter: (delayMs, options = {}) => (slowCreates = delayMs === undefined ? undefined : { delayMs, place: options.place ?? true }),
    createsAnswered: () => createsAnswered,
    creates: () => requests.filter((r) => r.method === 'POST' && r.path.endsWith('/Calls.json')),
    updates: () => requests.filter((r) => r.method === 'POST' && /\/Calls\/CA[0-9a-f]+\.json$/.test(r.path)),
    fetches: () => requests.filter((r) => r.method === 'GET' && /\/Calls\/CA[0-9a-f]+\.json$/.test(r.path)),
    lists: () => requests.filter((r) => r.method === 'GET' && r.path.endsWith('/Calls.json')),
  };
}

/** RFC 2822 in UTC, as Twilio writes dates: `Tue, 10 Aug 2010 08:02:17 +0000`. */
function rfc2822(ms: number): string {
  return new Date(ms).toUTCString().replace(/GMT$/, '+0000');
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
