// @dialtone/client's stream with `reconnect: false` (what the console's own reconnection uses): one
// connection read to its end, and a refusal thrown at once, never retried. Against a fetch double:
// what is tested is the iterator's policy, not the service (test/client.test.ts reads the real stream).
import assert from 'node:assert/strict';
import { DialtoneApiError, DialtoneCore } from '../packages/client/src/core.js';
import { describe, it } from './helpers/suite.js';

/** A fetch that answers each call with the next of `answers`, recording the headers it was sent. */
function fetchDouble(answers: (() => Response)[]): { fetch: typeof fetch; sent: Headers[] } {
  const sent: Headers[] = [];
  return {
    sent,
    fetch: async (_input, init) => {
      sent.push(new Headers(init?.headers));
      const next = answers.shift();
      if (!next) throw new TypeError('no more answers: the iterator connected again');
      return next();
    },
  };
}

const sse = (text: string) => () => new Response(text, { status: 200, headers: { 'content-type': 'text/event-stream' } });

describe('@dialtone/client stream, reconnect: false', () => {
  it('reads one connection to its end, sending the given Last-Event-ID, and does not connect again', async () => {
    const double = fetchDouble([sse('id: 7\nevent: ready\ndata: {"last_event_id":7}\n\nid: 8\nevent: run\ndata: {"id":8,"run_id":1,"type":"queued"}\n\n')]);
    const client = new DialtoneCore({ baseUrl: 'http://dialtone.test', apiKey: 'dt_key', fetch: double.fetch });
    const seen = [];
    for await (const message of client.stream.events({ reconnect: false, lastEventId: '6' })) seen.push([message.id, message.event]);
    assert.deepEqual(seen, [['7', 'ready'], ['8', 'run']]);
    assert.equal(double.sent.length, 1, 'one connection');
    assert.equal(double.sent[0]?.get('last-event-id'), '6');
    assert.equal(double.sent[0]?.get('x-api-key'), 'dt_key');
  });

  it('throws a 503 refusal as DialtoneApiError at once, where the default would wait and connect again', async () => {
    const refused = () => new Response(JSON.stringify({ status: 503, code: 'draining', title: 'Draining' }), { status: 503, headers: { 'content-type': 'application/problem+json', 'retry-after': '30' } });
    const double = fetchDouble([refused]);
    const client = new DialtoneCore({ baseUrl: 'http://dialtone.test', apiKey: 'dt_key', fetch: double.fetch });
    const error = await (async () => {
      for await (const message of client.stream.events({ reconnect: false })) assert.fail(`no message expected, got ${message.event}`);
    })().then(
      () => assert.fail('expected a refusal'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof DialtoneApiError);
    assert.equal(error.status, 503);
    assert.equal(error.code, 'draining');
    assert.equal(error.retryAfterSeconds, 30);
    assert.equal(double.sent.length, 1, 'not retried');
  });

  it('throws when it cannot connect, instead of trying again', async () => {
    const client = new DialtoneCore({ baseUrl: 'http://dialtone.test', apiKey: 'dt_key', fetch: fetchDouble([]).fetch });
    await assert.rejects(async () => {
      for await (const message of client.stream.events({ reconnect: false })) assert.fail(`no message expected, got ${message.event}`);
    }, /no more answers/);
  });
});
