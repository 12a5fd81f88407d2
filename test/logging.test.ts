// No secret and no full phone number reaches a log, at any level: the service's own logger is
// captured at `trace` while malformed and valid requests carry a real API key and a real number.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger, maskPhoneNumber, maskUrl } from '../src/logging.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { exchange, listening } from './helpers/raw-http.js';

const NUMBER = '+12025550123';
const DIGITS = NUMBER.slice(1);

/** A logger writing every line at `level` and above into memory. */
function capturedLogger(level = 'trace') {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return {
    logger: createLogger({ level }, sink),
    text: () => lines.join(''),
    /** The lines about one request, parsed. */
    about: (requestId: string | null) => lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.reqId === requestId),
  };
}

describe('Logs', () => {
  it('never carry the API key or the full phone number of malformed, refused or accepted requests, even at trace level', async (t) => {
    const log = capturedLogger();
    const { port, deps } = await listening(t, { logger: log.logger, env: { LOG_LEVEL: 'trace', MAX_HEADER_BYTES: '2048' } });
    const f = await createOrgFixture(deps);
    const url = `http://127.0.0.1:${port}`;
    const body = JSON.stringify({ phone_number: NUMBER, initial_context: { callback: NUMBER } });
    const headers = { 'x-api-key': f.apiKey, 'content-type': 'application/json' };

    // Bytes that are not HTTP, after headers carrying the key: Node attaches them to its error.
    await exchange(t, port, `POST ${PATHS.initiateCall(f.agentUuid)} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${f.apiKey}\r\nContent-Length: ${body.length}\r\nBad Header\r\n\r\n${body}`);
    // Headers over the limit, with the key among them.
    await exchange(t, port, `POST /api/v1/public/agent/x HTTP/1.1\r\nHost: x\r\nX-API-Key: ${f.apiKey}\r\nX-Pad: ${'p'.repeat(4096)}\r\n\r\n`);
    // Refused and accepted requests through a real client.
    const accepted = await fetch(`${url}${PATHS.initiateCall(f.agentUuid)}`, { method: 'POST', headers, body });
    assert.equal(accepted.status, 200);
    await fetch(`${url}${PATHS.initiateCall(f.agentUuid)}`, { method: 'POST', headers, body: JSON.stringify({ phone_number: `${NUMBER}999999` }) });
    await fetch(`${url}${PATHS.initiateCall(f.agentUuid)}`, { method: 'POST', headers, body: `{"phone_number":"${NUMBER}",` });
    await fetch(`${url}${PATHS.initiateCall(f.agentUuid)}`, { method: 'POST', headers: { ...headers, 'x-api-key': `${f.apiKey}x` }, body });
    const run = (await accepted.json()) as { workflow_run_id: number };
    await fetch(`${url}/api/v1/public/workflow-runs/${run.workflow_run_id}`, { headers });
    // Suppressions name the number in the URL, percent-encoded or not.
    const suppressed = await fetch(`${url}/api/v1/public/suppressions/${encodeURIComponent(NUMBER)}`, { method: 'PUT', headers: { 'x-api-key': f.apiKey } });
    assert.equal(suppressed.status, 200);
    await fetch(`${url}/api/v1/public/suppressions/${NUMBER}`, { headers: { 'x-api-key': f.apiKey } });
    await fetch(`${url}/api/v1/public/suppressions?after=${encodeURIComponent(NUMBER)}`, { headers: { 'x-api-key': f.apiKey } });

    const text = log.text();
    assert.match(text, /client error before routing/, 'the malformed requests were logged');
    assert.match(text, /incoming request/, 'requests were logged at this level, on arrival');
    assert.match(text, /request completed/, 'and when answered');
    assert.ok(!text.includes(f.apiKey), 'the API key is not in the log');
    assert.ok(!text.includes(DIGITS), 'the phone number is not in the log');
  });

  it('writes one line per request at info level, when it is answered: method, masked URL, status and response time', async (t) => {
    const log = capturedLogger('info');
    const { port, deps } = await listening(t, { logger: log.logger, env: { LOG_LEVEL: 'info' } });
    const f = await createOrgFixture(deps);
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/public/suppressions/${encodeURIComponent(NUMBER)}`, { method: 'PUT', headers: { 'x-api-key': f.apiKey } });
    assert.equal(response.status, 200);
    const requestId = response.headers.get('x-request-id');
    const about = log.about(requestId);
    assert.equal(about.length, 1, JSON.stringify(about));
    const [entry] = about as [{ msg: string; req: { method: string; url: string }; res: { statusCode: number }; responseTime: number }];
    assert.equal(entry.msg, 'request completed');
    assert.equal(entry.req.method, 'PUT');
    assert.match(entry.req.url, /^\/api\/v1\/public\/suppressions\//);
    assert.ok(!entry.req.url.includes(DIGITS), 'the number in the URL is masked');
    assert.equal(entry.res.statusCode, 200);
    assert.equal(typeof entry.responseTime, 'number');
  });

  it('writes the one line of a request the client ends before its answer (an event stream, a caller giving up) when it ends', async (t) => {
    const log = capturedLogger('info');
    const { port, deps } = await listening(t, { logger: log.logger, env: { LOG_LEVEL: 'info' } });
    const f = await createOrgFixture(deps);
    const requestId = 'stream-ended-by-client';
    const abort = new AbortController();
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/public/stream`, { headers: { 'x-api-key': f.apiKey, 'x-request-id': requestId }, signal: abort.signal });
    assert.equal(response.status, 200);
    abort.abort();
    let about = log.about(requestId);
    for (let i = 0; i < 100 && about.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      about = log.about(requestId);
    }
    assert.equal(about.length, 1, JSON.stringify(about));
    const [entry] = about as [{ msg: string; req: { url: string } }];
    assert.equal(entry.msg, 'request ended by the client before its answer');
    assert.equal(entry.req.url, '/api/v1/public/stream');
  });

  it('masks a number in a logged URL in any form a caller types it: path or phone_number query, with or without +, spaced, bracketed or percent-encoded', () => {
    const typed = ['+12025550123', '%2B12025550123', '+1 (202) 555-0123', '%2B1%20(202)%20555-0123', '12025550123', '1 202 555 0123'];
    for (const form of typed) {
      for (const url of [`/api/v1/public/suppressions/${form}`, `/api/v1/public/workflow-runs?phone_number=${form}&limit=5`, `/api/v1/public/workflow-runs?phone_number=${encodeURIComponent(form)}`]) {
        const logged = maskUrl(url);
        assert.doesNotMatch(logged.replace(/[^0-9]/g, ''), /2025550123/, `${url} → ${logged}`);
      }
    }
    assert.equal(maskUrl('/api/v1/public/workflow-runs/42/events?after=3'), '/api/v1/public/workflow-runs/42/events?after=3', 'other URLs are logged as they are');
  });

  it('never carries an API key sent in a query string or a path, nor the value of a query parameter named like a secret, in the URL it logs for the request', async (t) => {
    const log = capturedLogger('info');
    const { port, deps } = await listening(t, { logger: log.logger, env: { LOG_LEVEL: 'info' } });
    const f = await createOrgFixture(deps);
    const secrets = ['s3cr3t-token-value', 'another-s3cr3t', 'third-s3cr3t', 'fourth-s3cr3t'];
    const urls = [
      `/api/v1/public/stream?api_key=${f.apiKey}`,
      `/api/v1/public/stream?last_event_id=3&auth=${encodeURIComponent(f.apiKey)}`,
      `/api/v1/public/workflow-runs?token=${secrets[0]}&limit=5`,
      `/api/v1/public/workflow-runs?key=${secrets[1]}`,
      `/api/v1/public/workflow-runs?access_token=${secrets[2]}&apiKey=${secrets[3]}`,
      `/api/v1/public/${f.apiKey}`,
    ];
    const requestIds: string[] = [];
    for (const [index, url] of urls.entries()) {
      const requestId = `query-secret-${index}`;
      requestIds.push(requestId);
      const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { 'x-request-id': requestId } });
      assert.ok(response.status >= 400, `${url} is refused (${response.status})`);
      await response.arrayBuffer();
    }
    const text = log.text();
    const publicId = f.apiKey.split('_')[2] as string;
    assert.ok(!text.includes(f.apiKey) && !text.includes(publicId), 'no part of the key after its prefix is in the log');
    for (const secret of secrets) assert.ok(!text.includes(secret), `${secret} is not in the log`);
    const logged = requestIds.map((id) => (log.about(id)[0] as { req?: { url: string } } | undefined)?.req?.url);
    assert.deepEqual(logged, [
      '/api/v1/public/stream?api_key=[redacted]',
      '/api/v1/public/stream?last_event_id=3&auth=[redacted]',
      '/api/v1/public/workflow-runs?token=[redacted]&limit=5',
      '/api/v1/public/workflow-runs?key=[redacted]',
      '/api/v1/public/workflow-runs?access_token=[redacted]&apiKey=[redacted]',
      '/api/v1/public/dt_live_[redacted]',
    ]);
  });

  it('masks anything shaped like an API key in a logged URL or text, whatever the parameter carrying it is called', () => {
    const key = 'dt_live_AbCdEfGhIj_0123456789abcdefghijklmnopqrstuv';
    assert.equal(maskUrl(`/api/v1/public/stream?q=${key}`), '/api/v1/public/stream?q=dt_live_[redacted]');
    assert.equal(maskUrl(`/x?filter=name%3D${key}`), '/x?filter=name%3Ddt_live_[redacted]');
    assert.equal(maskUrl('/x?note=dt_test_abc'), '/x?note=dt_test_[redacted]');
    assert.equal(maskUrl('/x?X-Api-Key=abc&client_secret=def&password=ghi&after=7'), '/x?X-Api-Key=[redacted]&client_secret=[redacted]&password=[redacted]&after=7');
    const log = capturedLogger();
    log.logger.warn({ detail: `refused ${key}` }, `the key ${key} was refused`);
    assert.ok(!log.text().includes('AbCdEfGhIj'), log.text());
    assert.match(log.text(), /the key dt_live_\[redacted\] was refused/);
  });

  it('logs an HTTP client\'s error without the credentials and request body it carries', () => {
    const log = capturedLogger();
    // The shape of an axios error, as the twilio SDK rejects with one when Twilio cannot be reached.
    const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), {
      code: 'ECONNREFUSED',
      config: { auth: { username: 'AC123', password: 'auth_token_secret' }, headers: { Authorization: 'Basic QUMxMjM6c2VjcmV0' }, data: 'To=%2B12025550123' },
      cause: Object.assign(new Error(`refused ${NUMBER}`), { request: { headers: { authorization: 'Bearer run_token_secret' } } }),
    });
    log.logger.warn({ err: error, runId: 1 }, 'dial failed');
    const text = log.text();
    assert.match(text, /ECONNREFUSED/, 'what went wrong is still logged');
    assert.ok(!/auth_token_secret|QUMxMjM6c2VjcmV0|run_token_secret|12025550123/.test(text), text);
  });

  it('censors a secret field one level down in any logged object, and at the top of a child logger\'s bindings, leaving the caller\'s objects as they were', () => {
    const log = capturedLogger();
    const route = { name: 'Twilio main', settings: { account_sid: 'AC123' }, auth_token: 'tw_secret', token: 'tok_secret' };
    const child = log.logger.child({ reqId: 'req-1', secret: 'whsec_secret' });
    child.info({ route, headers: { 'x-api-key': 'dt_live_hdr_secret', authorization: 'Bearer hdr_secret', accept: 'application/json' }, count: 2 }, 'configured');
    const entry = JSON.parse(log.text()) as Record<string, Record<string, unknown>>;
    assert.deepEqual(entry.route, { name: 'Twilio main', settings: { account_sid: 'AC123' }, auth_token: '[redacted]', token: '[redacted]' });
    assert.deepEqual(entry.headers, { 'x-api-key': '[redacted]', authorization: '[redacted]', accept: 'application/json' });
    assert.equal(entry.reqId, 'req-1');
    assert.equal(entry.secret, '[redacted]');
    assert.equal(route.auth_token, 'tw_secret', 'the logged object itself is not changed');
    assert.ok(!/tw_secret|tok_secret|whsec_secret|hdr_secret/.test(log.text()), log.text());
  });

  it('censors a secret field in what a logged object writes: its own fields, or what its toJSON gives, even from a private field', () => {
    const log = capturedLogger();
    class Login {
      constructor(
        readonly user: string,
        readonly password: string,
      ) {}
    }
    class Session {
      readonly #token: string;
      constructor(
        readonly user: string,
        token: string,
      ) {
        this.#token = token;
      }
      toJSON() {
        return { user: this.user, token: this.#token, kind: 'bearer' };
      }
    }
    log.logger.info({ login: new Login('ada', 'pw_secret'), session: new Session('ada', 'tok_private_secret'), at: new Date(0) }, 'signed in');
    const entry = JSON.parse(log.text()) as Record<string, unknown>;
    assert.deepEqual(entry.login, { user: 'ada', password: '[redacted]' });
    assert.deepEqual(entry.session, { user: 'ada', token: '[redacted]', kind: 'bearer' });
    assert.equal(entry.at, '1970-01-01T00:00:00.000Z', 'a Date is written as JSON writes it');
  });

  it('writes a logged res as its status code alone, on every logger', () => {
    const log = capturedLogger();
    log.logger.warn({ res: { statusCode: 502, headers: { authorization: 'Bearer res_secret' }, token: 'res_token_secret' } }, 'provider answered');
    const entry = JSON.parse(log.text()) as Record<string, unknown>;
    assert.deepEqual(entry.res, { statusCode: 502 });
  });

  it('masks numbers in logged errors and messages and redacts secret fields', () => {
    const log = capturedLogger();
    const error = Object.assign(new Error(`The 'To' number ${NUMBER} is not a valid phone number.`), { rawPacket: Buffer.from(`X-API-Key: dt_live_secret ${NUMBER}`) });
    log.logger.error({ err: error, runId: 3 }, 'dial failed');
    log.logger.warn({ detail: `refused ${NUMBER}` }, `calling ${NUMBER} failed`);
    log.logger.info({ apiKey: 'dt_live_secret', credentials: { auth_token: 'tok_secret' }, config: { password: 'pw_secret' } }, 'stored');
    const text = log.text();
    assert.ok(!text.includes(DIGITS), text);
    assert.ok(!/dt_live_secret|tok_secret|pw_secret/.test(text), text);
    assert.ok(text.includes(maskPhoneNumber(NUMBER)), 'the masked number still tells calls apart');
    assert.equal(maskPhoneNumber(NUMBER), '+1202555****');
  });
});
