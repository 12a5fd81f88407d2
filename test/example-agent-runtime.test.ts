// The example agent runtime (examples/agent-runtime/, issue 36 item 3) taking a simulated call end
// to end: Dialtone streams the answered call to it (issue 34 item 4), it reads its run with the
// token, plays its greeting (espeak-ng when installed, else its tone prompt), records the callee,
// reports its result and hangs up through the runtime control API. Dialtone listens on a real port
// here, since the runtime calls its API over HTTP as it would in production.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgentRuntime } from '../examples/agent-runtime/src/runtime.js';
import { verifyRunToken } from '../src/runtime/run-token.js';
import { CredentialsCipher } from '../src/shared/credentials-cipher.js';
import { postJson } from './helpers/app.js';
import { decodeMulaw, dominantFrequency, readWavSamples } from './helpers/audio.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS } from './helpers/fixtures.js';
import { startService, STARTUP_TIMEOUT_MS } from './helpers/process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

/**
 * The samples of `samples` that are not digital silence, in order. The simulated callee's
 * recording keeps the silences of the line (before the greeting, and any gap a late timer made in
 * its pacing, as a SIP callee would hear it), so what it heard is compared sound for sound.
 */
function sounds(samples: Int16Array): Int16Array {
  return samples.filter((sample) => sample !== 0);
}

async function until(what: string, done: () => boolean, poll: () => Promise<void> = async () => undefined): Promise<void> {
  const deadline = Date.now() + scaledTimeout(15_000);
  for (;;) {
    await poll();
    if (done()) return;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

for (const store of await storeCases()) {
  describe(`The example agent runtime (${store.kind})`, { skip: store.skip }, () => {
    it('takes a simulated call placed through the public API: start with a valid token and the callee\'s audio, its greeting heard whole by the simulated callee, the callee recorded to its WAV file, and the run completed with its result', async (t) => {
      let dialtoneUrl = '';
      const runtime = await startAgentRuntime({
        port: 0,
        dialtoneUrl: () => dialtoneUrl,
        recordingsDir: mkdtempSync(join(tmpdir(), 'dialtone-example-recordings-')),
        listenMs: 1_000,
        speech: true,
        log: () => undefined,
      });
      t.after(() => runtime.close());
      const heard = mkdtempSync(join(tmpdir(), 'dialtone-example-heard-'));
      const env = await buildWithDispatcher(t, store.kind, {
        env: { AGENT_RUNTIME_URL: runtime.url, SIMULATOR_STREAM_RECORD_DIR: heard, MAX_CALL_DURATION_MS: '60000', RING_TIMEOUT_MS: '5000' },
      });
      dialtoneUrl = await env.app.listen({ host: '127.0.0.1', port: 0 });
      const f = await createOrgFixture(env.deps, 'Acme', definition({ greeting: 'Hello {{name | there}}, this is Acme calling.' }));
      // Answered, and never hangs up by itself (docs/simulator.md): the runtime ends the call.
      const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550107', initial_context: { name: 'Ada' } }, { key: f.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      const runId = response.json().workflow_run_id as number;

      const run = await waitForRun(env, runId, ended, scaledTimeout(30_000));
      const call = runtime.calls[0];
      assert.ok(call, 'the call reached the runtime');
      // The run ends before the runtime is answered (and sent `stop`): its own account follows.
      await until('the runtime sees the call end', () => call.end !== undefined);
      assert.deepEqual(call.errors, []);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'agent_hangup');
      assert.ok(call.result);
      assert.deepEqual(run.result, call.result, 'the run carries the runtime\'s result');
      assert.equal(call.end, 'hung_up');

      // The stream's start named the run, with a token that is the run's own.
      assert.equal(call.runId, runId);
      assert.ok(verifyRunToken(env.deps.cipher, runId, call.token, Date.now()));
      assert.equal(call.callSid, run.provider_call_id);
      assert.equal(call.greeting?.text, 'Hello Ada, this is Acme calling.');
      assert.ok(call.greetingPlayed, 'the greeting\'s mark came back');

      // The simulated callee heard the whole greeting, unchanged, in order, and nothing else.
      const greeting = sounds(decodeMulaw(call.greeting?.mulaw ?? new Uint8Array(0)));
      assert.ok(greeting.length > 1_600, 'a greeting of some length');
      const callee = sounds(readWavSamples(join(heard, `run-${runId}.wav`)));
      assert.equal(callee.length, greeting.length, `the callee heard ${callee.length} samples of sound of a greeting's ${greeting.length}`);
      assert.ok(Buffer.from(callee.buffer, callee.byteOffset, callee.byteLength).equals(Buffer.from(greeting.buffer, greeting.byteOffset, greeting.byteLength)), 'what the callee heard is the greeting');

      // The runtime's recording holds the simulated callee's voice: its 440 Hz tone, from the start.
      assert.ok(call.framesReceived >= 50, `${call.framesReceived} frames of the callee`);
      const recorded = readWavSamples(call.recording);
      assert.equal(recorded.length, call.framesReceived * 160);
      assert.deepEqual(dominantFrequency(recorded.subarray(0, 8_000), [440, 523, 659, 784, 1000]), { frequency: 440, clear: true });
      assert.ok(Number(call.result.heard_speech_ms) > 0);
    });
  });
}

describe('The example agent runtime behind npm start', () => {
  it('takes a call placed with the key and agent that npm start prints on an empty SQLite database, its token signed with the key generated there, and completes it with its result', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-example-start-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    let dialtoneUrl = '';
    // The tone prompt this time: the runtime without espeak-ng.
    const runtime = await startAgentRuntime({ port: 0, dialtoneUrl: () => dialtoneUrl, recordingsDir: join(dir, 'recordings'), listenMs: 500, speech: false, log: () => undefined });
    t.after(() => runtime.close());
    // As the README's `npm start`, with no DIALTONE_SECRET_KEY: the key is generated beside the database.
    const service = startService(t, {
      PORT: '0',
      HOST: '127.0.0.1',
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DISPATCH_SHUTDOWN_MS: '500',
      DATABASE_URL: `sqlite:${join(dir, 'dialtone.db')}`,
      AGENT_RUNTIME_URL: runtime.url,
    });
    dialtoneUrl = (await service.waitForStdout(/"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"/, scaledTimeout(STARTUP_TIMEOUT_MS)))[1] ?? '';
    const agentUuid = (await service.waitForStdout(/Agent UUID\s+(\S+)/, scaledTimeout(STARTUP_TIMEOUT_MS)))[1];
    const apiKey = /API key\s+(dt_live_\S+)/.exec(service.stdout())?.[1];
    assert.ok(apiKey && agentUuid, service.stdout());

    // The README's call, to a number that never hangs up by itself: the runtime ends it.
    const placed = await fetch(`${dialtoneUrl}/api/v1/public/agent/${agentUuid}`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ phone_number: '+12025550107', initial_context: { customer_name: 'Ada', topic: 'your order' } }),
    });
    assert.equal(placed.status, 200, await placed.clone().text());
    const { workflow_run_id: runId } = (await placed.json()) as { workflow_run_id: number };
    await until('the runtime sees the call end', () => runtime.calls[0]?.end !== undefined);
    const call = runtime.calls[0];
    assert.ok(call);
    assert.deepEqual(call.errors, [], service.stdout().slice(-3000));
    assert.equal(call.runId, runId);
    assert.equal(call.greeting?.text, 'Hello Ada, this is the Dialtone demo calling about your order.');
    assert.equal(call.greeting?.voice, 'tone');
    const key = readFileSync(join(dir, 'dialtone.db.key'), 'utf8').trim();
    assert.ok(verifyRunToken(new CredentialsCipher(key), runId, call.token, Date.now()), 'the token is signed with the generated key');

    let run: { state?: string; outcome_reason?: string; result?: unknown } = {};
    await until('the run ends', () => run.state === 'completed', async () => {
      run = (await (await fetch(`${dialtoneUrl}/api/v1/public/workflow-runs/${runId}`, { headers: { 'x-api-key': apiKey } })).json()) as typeof run;
    });
    assert.equal(run.outcome_reason, 'agent_hangup');
    assert.deepEqual(run.result, call.result);
  });
});
