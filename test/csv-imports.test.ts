// CSV imports (issue 29): the suppression list's and a campaign's contacts'. A large file is read
// in slices that let the event loop serve other requests, its lines are bounded in length and
// number (invalid and repeated lines count), a header alone imports nothing, line numbers stay
// true after quoted line breaks, a file that is not UTF-8 is refused naming the line, and no route
// but the two imports takes text/csv.
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { importContactCsv } from '../src/campaigns/contacts.js';
import { DialtoneError } from '../src/errors.js';
import { readCsvBody, SLICE_MS, type CsvBodyOptions } from '../src/shared/csv-body.js';
import { importSuppressions, importLimitsOf } from '../src/policy/suppressions.js';
import { issueRunToken } from '../src/runtime/run-token.js';
import { build, getJson } from './helpers/app.js';
import { CAMPAIGNS, createCampaign } from './helpers/campaigns.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const IMPORT = '/api/v1/public/suppressions/import';

function postCsv(app: FastifyInstance, key: string, url: string, csv: string | Buffer) {
  return app.inject({ method: 'POST', url, headers: { 'x-api-key': key, 'content-type': 'text/csv' }, payload: csv });
}

/** `count` distinct valid numbers, one a line. */
function numbers(count: number, first = 0): string[] {
  return Array.from({ length: count }, (_, i) => `+1646${2_000_000 + first + i}`);
}

async function suppressedCount(app: FastifyInstance, key: string): Promise<number> {
  const listed = await getJson(app, '/api/v1/public/suppressions?limit=1000', key);
  assert.equal(listed.statusCode, 200, listed.body);
  return (listed.json() as { data: unknown[] }).data.length;
}

const READ_OPTIONS: CsvBodyOptions = {
  maxBytes: 1024 * 1024,
  limitName: 'TEST_MAX_BYTES',
  maxLineBytes: 1024,
  sliceLines: 10,
  columnName: (cell) => cell.trim().toLowerCase(),
  requiredColumn: 'phone_number',
  headerHint: '',
};

describe('Reading a CSV import', () => {
  it('hands over at most CSV_IMPORT_SLICE_LINES records between two yields to the event loop', async () => {
    const seenAtYield: number[] = [];
    let seen = 0;
    const csv = `phone_number\n${numbers(95).join('\n')}\n`;
    for await (const _ of readCsvBody(Readable.from([Buffer.from(csv)]), { ...READ_OPTIONS, sliceLines: 10, yieldToLoop: async () => void seenAtYield.push(seen) })) seen++;
    assert.equal(seen, 95);
    const steps = [...seenAtYield, seen].map((n, i, all) => n - (all[i - 1] ?? 0));
    assert.ok(steps.every((step) => step <= 10), `records between yields: ${steps.join(',')}`);
    assert.ok(seenAtYield.filter((n) => n > 0 && n < 95).length >= 9, `yields while records remain: ${seenAtYield.join(',')}`);
  });

  it('ends a slice before CSV_IMPORT_SLICE_LINES records once it has run SLICE_MS', async () => {
    const seenAtYield: number[] = [];
    let seen = 0;
    // Each record costs 40% of SLICE_MS on this clock: a slice ends after its third.
    let clock = 0;
    const csv = `phone_number\n${numbers(12).join('\n')}\n`;
    const options = { ...READ_OPTIONS, sliceLines: 250, now: () => clock, yieldToLoop: async () => void seenAtYield.push(seen) };
    for await (const _ of readCsvBody(Readable.from([Buffer.from(csv)]), options)) {
      seen++;
      clock += SLICE_MS * 0.4;
    }
    assert.deepEqual(seenAtYield.slice(1), [3, 6, 9, 12]);
  });

  it('refuses a line longer than CSV_IMPORT_MAX_LINE_BYTES as soon as it arrives, naming it, without waiting for the rest', async () => {
    const body = new PassThrough();
    const reading = (async () => {
      for await (const _ of readCsvBody(body, READ_OPTIONS));
    })();
    body.write('phone_number\n+16462000000\n');
    // An endless line: the body never ends, so only the limit can end the read.
    body.write('x'.repeat(600));
    body.write('x'.repeat(600));
    await assert.rejects(reading, (error: unknown) => error instanceof DialtoneError && error.code === 'validation_failed' && /Line 3 is longer than 1024 bytes/.test(error.errors?.[0]?.detail ?? ''));
    body.destroy();
  });

  it('numbers each record by the line it starts on, after quoted cells holding CRLF or LF line breaks', async () => {
    const csv = 'phone_number,reason\r\n+16462000000,"two\r\nlines"\r\n+16462000001,"three\nmore\nlines"\r\n\r\n+16462000002,one\r\n';
    const lines: number[] = [];
    for await (const { line } of readCsvBody(Readable.from([Buffer.from(csv)]), READ_OPTIONS)) lines.push(line);
    assert.deepEqual(lines, [2, 4, 8]);
  });

  it('refuses a body that is not UTF-8, naming the first line that is not', async () => {
    const csv = Buffer.concat([Buffer.from('phone_number,reason\n+16462000000,café\n+16462000001,'), Buffer.from([0xe9, 0x74, 0xe9]), Buffer.from('\n+16462000002,ok\n')]);
    await assert.rejects(
      (async () => {
        for await (const _ of readCsvBody(Readable.from([csv]), READ_OPTIONS));
      })(),
      (error: unknown) => error instanceof DialtoneError && error.code === 'validation_failed' && /Line 3 is not valid UTF-8/.test(error.errors?.[0]?.detail ?? ''),
    );
  });

  /** The body one byte a chunk: every line, CRLF and multi-byte character is split between two chunks. */
  const byteByByte = (body: Buffer) => Readable.from(Array.from(body, (byte) => Buffer.from([byte])));
  const readAll = async (body: Readable, options: CsvBodyOptions = READ_OPTIONS) => {
    const read: Array<{ line: number; record: Record<string, string | undefined> }> = [];
    for await (const { line, record } of readCsvBody(body, options)) read.push({ line, record });
    return read;
  };

  it('reads a body split inside its lines, CRLFs and multi-byte characters as it reads it whole', async () => {
    const csv = Buffer.from('phone_number,reason\r\n+16462000000,café ☎ 𝄞\r\n+16462000001,"two\r\nlines é"\r\n\r\n+16462000002,naïve\n');
    const whole = await readAll(Readable.from([csv]));
    assert.deepEqual(whole.map(({ line }) => line), [2, 3, 6]);
    assert.equal(whole[0]?.record.reason, 'café ☎ 𝄞');
    assert.deepEqual(await readAll(byteByByte(csv)), whole);
  });

  it('names the first line that is not UTF-8 when its bytes arrive in several chunks, the last line without its newline too', async () => {
    const notUtf8 = (body: Readable) =>
      assert.rejects(readAll(body), (error: unknown) => error instanceof DialtoneError && error.code === 'validation_failed' && /^Line (\d+) is not valid UTF-8/.exec(error.errors?.[0]?.detail ?? '')?.[1] === '4');
    // A character cut short (0xc3 without its continuation byte) on line 4, after valid two-byte characters split between chunks.
    const cutShort = Buffer.concat([Buffer.from('phone_number,reason\n+16462000000,é\n+16462000001,é\n+16462000002,'), Buffer.from([0xc3]), Buffer.from('x\n+16462000003,ok\n')]);
    await notUtf8(byteByByte(cutShort));
    await notUtf8(Readable.from([cutShort.subarray(0, 50), cutShort.subarray(50)]));
    // The last line, with no newline after it, is checked once the body ends.
    const lastLine = Buffer.concat([Buffer.from('phone_number,reason\n+16462000000,a\n+16462000001,b\n+16462000002,'), Buffer.from([0xe9])]);
    await notUtf8(byteByByte(lastLine));
  });

  it('takes a line of exactly CSV_IMPORT_MAX_LINE_BYTES split between chunks, and refuses one byte more', async () => {
    const options = { ...READ_OPTIONS, maxLineBytes: 64 };
    const reason = (bytes: number) => 'x'.repeat(bytes - '+16462000000,'.length);
    const exact = Buffer.from(`phone_number,reason\n+16462000000,${reason(64)}\r\n`);
    // The CR before the newline counts toward the line's bytes: 64 bytes with it.
    const exactWithCr = Buffer.from(`phone_number,reason\n+16462000000,${reason(63)}\r\n`);
    assert.equal((await readAll(byteByByte(exactWithCr), options)).length, 1);
    await assert.rejects(
      readAll(byteByByte(exact), options),
      (error: unknown) => error instanceof DialtoneError && /Line 2 is longer than 64 bytes/.test(error.errors?.[0]?.detail ?? ''),
    );
  });
});

for (const store of await storeCases()) {
  describe(`CSV imports (${store.kind})`, { skip: store.skip }, () => {
    it('answers /healthz between the slices of a suppression import, before the import has been read through', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const csv = `phone_number\n${numbers(400).join('\n')}\n`;
      let slices = 0;
      let health: Promise<unknown> | undefined;
      let answeredAtSlice: number | undefined;
      const result = await importSuppressions({ store: deps.store, clock: deps.clock }, f.orgId, Readable.from([Buffer.from(csv)]), {
        ...importLimitsOf(deps.config),
        sliceLines: 10,
        yieldToLoop: async () => {
          slices++;
          // A request arrives while the file is being read; it must be answered before the read ends.
          if (slices === 3) {
            health = app.inject({ method: 'GET', url: '/healthz' }).then((response) => {
              assert.equal(response.statusCode, 200);
              answeredAtSlice = slices;
            });
          }
          await nextTurn();
        },
      });
      await health;
      assert.equal(result.imported, 400);
      assert.ok(answeredAtSlice !== undefined && answeredAtSlice < 40, `/healthz answered at slice ${answeredAtSlice} of ${slices}`);
    });

    it('answers /healthz between the slices of a contacts CSV import, before the import has been read through', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CSV_IMPORT_SLICE_LINES: '10' } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const csv = `phone_number,name\n${numbers(300).map((n) => `${n},Ada`).join('\n')}\n`;
      let slices = 0;
      let health: Promise<unknown> | undefined;
      let answeredAtSlice: number | undefined;
      const answer = await importContactCsv(deps, f.orgId, id, Readable.from([Buffer.from(csv)]), { idempotencyKey: undefined, path: `${CAMPAIGNS}/${id}/contacts` }, async () => {
        slices++;
        if (slices === 3) {
          health = app.inject({ method: 'GET', url: '/healthz' }).then((response) => {
            assert.equal(response.statusCode, 200);
            answeredAtSlice = slices;
          });
        }
        await nextTurn();
      });
      await health;
      assert.equal(JSON.parse(answer.json).added, 300);
      assert.ok(answeredAtSlice !== undefined && answeredAtSlice < 30, `/healthz answered at slice ${answeredAtSlice} of ${slices}`);
    });

    it('imports nothing from a suppression CSV holding only its header, and says so with imported 0', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      for (const csv of ['phone_number,reason\n', 'phone_number', '\uFEFFphone_number\r\n\r\n']) {
        const response = await postCsv(app, f.apiKey, IMPORT, csv);
        assert.equal(response.statusCode, 200, response.body);
        assert.deepEqual(response.json(), { imported: 0, invalid: [], invalid_count: 0 });
      }
      const empty = assertProblem(await postCsv(app, f.apiKey, IMPORT, '\n\n'), 422, 'validation_failed');
      assert.equal(empty.detail, 'The CSV is empty.');
    });

    it('adds nothing from a contacts CSV holding only its header, answering added 0', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const response = await postCsv(app, f.apiKey, `${CAMPAIGNS}/${id}/contacts`, 'phone_number,timezone,name\n');
      assert.equal(response.statusCode, 200, response.body);
      assert.deepEqual(response.json(), { added: 0, duplicates: 0, invalid: [], invalid_count: 0 });
    });

    it('counts repeated and invalid lines toward SUPPRESSION_IMPORT_MAX_LINES, refusing the file whole', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { SUPPRESSION_IMPORT_MAX_LINES: '3' } });
      const f = await createOrgFixture(deps);
      const [a] = numbers(1);
      const accepted = await postCsv(app, f.apiKey, IMPORT, `phone_number\n${a}\n${a}\nnot a number\n`);
      assert.equal(accepted.statusCode, 200, 'three lines are within the limit');
      assert.equal(accepted.json().imported, 1);
      const refused = assertProblem(await postCsv(app, f.apiKey, IMPORT, `phone_number\n${numbers(1, 5)[0]}\n${a}\n${a}\nnot a number\n`), 422, 'validation_failed');
      assert.match(refused.errors?.[0]?.detail ?? '', /Line 5: .*at most 3 lines .*SUPPRESSION_IMPORT_MAX_LINES/);
      assert.equal(await suppressedCount(app, f.apiKey), 1, 'the refused file wrote nothing');
    });

    it('counts repeated and invalid lines toward CAMPAIGN_CONTACTS_MAX_PER_REQUEST, adding nothing', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CAMPAIGN_CONTACTS_MAX_PER_REQUEST: '3' } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const [a] = numbers(1);
      const refused = assertProblem(await postCsv(app, f.apiKey, `${CAMPAIGNS}/${id}/contacts`, `phone_number\n${a}\n${a}\n${a}\nnope\n`), 422, 'validation_failed');
      assert.match(refused.errors?.[0]?.detail ?? '', /Line 5: an import carries at most 3 contacts/);
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 0);
    });

    it('refuses a suppression CSV with a line over CSV_IMPORT_MAX_LINE_BYTES with 422 naming the line, importing nothing', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CSV_IMPORT_MAX_LINE_BYTES: '100' } });
      const f = await createOrgFixture(deps);
      const refused = assertProblem(await postCsv(app, f.apiKey, IMPORT, `phone_number,reason\n${numbers(1)[0]},ok\n${numbers(1, 1)[0]},${'r'.repeat(120)}\n`), 422, 'validation_failed');
      assert.match(refused.errors?.[0]?.detail ?? '', /Line 3 is longer than 100 bytes \(CSV_IMPORT_MAX_LINE_BYTES\)/);
      assert.equal(await suppressedCount(app, f.apiKey), 0);
    });

    it('reports the true line of an invalid number after a quoted reason holding a CRLF', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const response = await postCsv(app, f.apiKey, IMPORT, `phone_number,reason\r\n${numbers(1)[0]},"asked\r\ntwice"\r\nnot a number,x\r\n`);
      assert.equal(response.statusCode, 200, response.body);
      assert.deepEqual(
        response.json().invalid.map((i: { line: number }) => i.line),
        [4],
      );
    });

    it('refuses a CSV that is not UTF-8 with 422 naming the line, importing nothing, suppressions and contacts alike', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const latin1 = Buffer.concat([Buffer.from(`phone_number,name\n${numbers(1)[0]},Ada\n${numbers(1, 1)[0]},Ren`), Buffer.from([0xe9]), Buffer.from('e\n')]);
      for (const url of [IMPORT, `${CAMPAIGNS}/${id}/contacts`]) {
        const refused = assertProblem(await postCsv(app, f.apiKey, url, latin1), 422, 'validation_failed');
        assert.match(refused.errors?.[0]?.detail ?? '', /Line 3 is not valid UTF-8/);
      }
      assert.equal(await suppressedCount(app, f.apiKey), 0);
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 0);
    });
  });
}

/** Every route of the app, from Fastify's own listing (printRoutes: a tree of path segments, each line `segment (METHODS)`). */
function routesOf(app: FastifyInstance): { method: string; path: string }[] {
  const routes: { method: string; path: string }[] = [];
  const stack: string[] = [];
  for (const text of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^([│ ]*)[├└]── (.+) \(([A-Z, ]+)\)$/.exec(text);
    if (!match) continue;
    const depth = (match[1] ?? '').length / 4;
    stack.length = depth;
    stack.push(match[2] ?? '');
    for (const method of (match[3] ?? '').split(', ')) routes.push({ method, path: stack.join('') });
  }
  return routes;
}

describe('Request bodies', () => {
  it('refuses a text/csv body with 415 unsupported_media_type on every route but the two CSV imports, echoing nothing internal', async (t) => {
    const { app, deps } = await build(t, 'sqlite');
    const f = await createOrgFixture(deps);
    const takesCsv = new Set(['POST /api/v1/public/suppressions/import', 'POST /api/v1/public/campaigns/:id/contacts']);
    const withBody = routesOf(app).filter((r) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method) && !takesCsv.has(`${r.method} ${r.path}`));
    assert.ok(withBody.length >= 20, `routes found: ${withBody.length}`);
    assert.ok(withBody.some((r) => r.path === '/api/v1/public/suppressions/:phone_number' && r.method === 'PUT'));
    // The agent runtime's actions check their run token before the body (authentication first,
    // docs/design.md "Check order"): they are sent a real run's token, so the body is what is refused.
    const created = await app.inject({ method: 'POST', url: PATHS.initiateCall(f.agentUuid), headers: { 'x-api-key': f.apiKey }, payload: { phone_number: '+12025550196' } });
    const runId = (created.json() as { workflow_run_id: number }).workflow_run_id;
    const runToken = issueRunToken(deps.cipher, runId, deps.clock.now() + 60_000);
    for (const route of withBody) {
      const runtime = route.path.startsWith('/api/v1/runtime/');
      const url = route.path
        .replace(':phone_number', '%2B12025550195')
        .replace(/:(uuid|workflow_uuid)/, f.agentUuid)
        .replace(/:[a-z_]+/g, runtime ? String(runId) : '1');
      const auth = runtime ? { authorization: `Bearer ${runToken}` } : { 'x-api-key': f.apiKey };
      const response = await app.inject({ method: route.method as 'POST', url, headers: { ...auth, 'content-type': 'text/csv' }, payload: 'x' });
      assert.equal(response.statusCode, 415, `${route.method} ${route.path}: ${response.body}`);
      assert.equal(response.json().code, 'unsupported_media_type');
      assert.doesNotMatch(response.body, /_events|rawHeaders|socket/);
    }
  });

  it('refuses a JSON body that is not UTF-8 with 400 malformed_json, storing nothing, instead of storing U+FFFD', async (t) => {
    const { app, deps } = await build(t, 'sqlite');
    const f = await createOrgFixture(deps);
    const url = '/api/v1/public/suppressions/%2B12025550195';
    const latin1 = Buffer.concat([Buffer.from('{"reason":"Ren'), Buffer.from([0xe9]), Buffer.from('e asked"}')]);
    const refused = assertProblem(await app.inject({ method: 'PUT', url, headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' }, payload: latin1 }), 400, 'malformed_json');
    assert.match(refused.detail, /not valid UTF-8/);
    assert.equal((await getJson(app, url, f.apiKey)).statusCode, 404, 'nothing was stored');
    const utf8 = await app.inject({ method: 'PUT', url, headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' }, payload: Buffer.from('{"reason":"Renée asked"}') });
    assert.equal(utf8.statusCode, 200, utf8.body);
    assert.equal(utf8.json().reason, 'Renée asked');
  });
});
