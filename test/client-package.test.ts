// The client package as a consumer meets it: its types are the ones the served OpenAPI document
// generates (a route changed without `npm run client:types` fails here), it builds, and a strict
// TypeScript project that imports the built package compiles the obvious lines, with no narrowing
// of the Initiate Call answer, and rejects a misspelled field.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CLIENT_TYPES_FILE, renderClientTypes, servedOpenApiDocument } from '../scripts/client-types.js';
import { ROOT } from './helpers/process.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

const run = promisify(execFile);
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

async function tsc(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return run(process.execPath, [TSC, ...args], { cwd, timeout: scaledTimeout(120_000) }).then(
    ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? 1, output: `${error.stdout ?? ''}${error.stderr ?? ''}` }),
  );
}

const CONSUMER = `import { createDialtone, DialtoneApiError, type WorkflowRun } from '@dialtone/client';

const dialtone = createDialtone({ baseUrl: 'http://127.0.0.1:3000', apiKey: 'dt_live_x' });

export async function place(): Promise<number> {
  const { workflow_run_id } = await dialtone.calls.start('agent-uuid', { phone_number: '+12025550100', initial_context: { name: 'Ada' } }, { idempotencyKey: 'k' });
  const run: WorkflowRun = await dialtone.runs.wait(workflow_run_id, { until: ['completed'] });
  const dry = await dialtone.calls.validate({ workflowUuid: 'workflow-uuid' }, { phone_number: '+12025550100' });
  const valid: 'valid' = dry.status;
  void valid;
  try {
    await dialtone.runs.cancel(run.id);
  } catch (error) {
    if (error instanceof DialtoneApiError) return error.errors.length + error.status + (error.retryAfterSeconds ?? 0) + error.code.length;
  }
  for await (const message of dialtone.stream.events({ lastEventId: '0' })) {
    if (message.event === 'run') return message.data.run_id;
  }
  return workflow_run_id;
}

export async function misspelled(): Promise<void> {
  // @ts-expect-error phone_number is required, and phone is no field of the body
  await dialtone.calls.start('agent-uuid', { phone: '+12025550100' });
}
`;

describe('@dialtone/client package', () => {
  it('holds the types the served OpenAPI document generates, and the comparison fails for a document that changed', async () => {
    const document = await servedOpenApiDocument();
    const rendered = await renderClientTypes(document);
    assert.equal(await readFile(CLIENT_TYPES_FILE, 'utf8'), rendered, 'packages/client/src/openapi.ts is stale: run npm run client:types');
    // A route removed (or added, or changed) without regenerating is caught by the same comparison.
    const { ['/api/v1/public/stats']: removed, ...paths } = document.paths ?? {};
    assert.ok(removed, 'the document serves /api/v1/public/stats');
    assert.notEqual(await renderClientTypes({ ...document, paths }), rendered);
  });

  it('builds, and a strict consumer project compiles the obvious lines against the built package and loads it', async (t) => {
    const client = join(ROOT, 'packages', 'client');
    const built = await tsc(['-p', join(client, 'tsconfig.json')], client);
    assert.equal(built.code, 0, built.output);

    const dir = await mkdtemp(join(tmpdir(), 'dialtone-consumer-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await mkdir(join(dir, 'node_modules', '@dialtone'), { recursive: true });
    await symlink(client, join(dir, 'node_modules', '@dialtone', 'client'), 'dir');
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: [] }, files: ['consumer.ts'] }),
    );
    await writeFile(join(dir, 'consumer.ts'), CONSUMER);
    const compiled = await tsc(['-p', 'tsconfig.json'], dir);
    assert.equal(compiled.code, 0, compiled.output);

    // Without the expect-error line's comment the misspelling is an error: the check is not vacuous.
    await writeFile(join(dir, 'consumer.ts'), CONSUMER.replace(/^\s*\/\/ @ts-expect-error.*$/m, ''));
    const refused = await tsc(['-p', 'tsconfig.json'], dir);
    assert.notEqual(refused.code, 0);
    assert.match(refused.output, /phone/);

    const loaded = await run(process.execPath, ['--input-type=module', '-e', "const m = await import('@dialtone/client'); console.log(typeof m.createDialtone, typeof m.DialtoneApiError, typeof m.verifyWebhook)"], { cwd: dir });
    assert.equal(loaded.stdout.trim(), 'function function function');
  });
});
