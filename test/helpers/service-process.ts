// The real service (`npm start`'s entry point) as a child process, started with the test defaults
// and resolved once it listens. Outside a test (the benchmark) the caller owns its end; tests kill
// it in their own `t.after`.
import { TEST_SECRET_KEY } from './app.js';
import { npmStartArgs, spawnProcess, type RunningProcess } from './process.js';

const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/;

export interface ServiceProcess {
  child: RunningProcess['child'];
  /** Base URL once the server listens. */
  url: string;
  output(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
}

export async function startServiceProcess(env: Record<string, string>, timeoutMs = 20_000): Promise<ServiceProcess> {
  const service = spawnProcess(process.execPath, npmStartArgs(), {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    DIALTONE_FIRST_RUN_DEMO: 'false',
    DIALTONE_SECRET_KEY: TEST_SECRET_KEY,
    // Load tests and the benchmark send as fast as they can; they measure the service, not its limits.
    RATE_LIMIT_KEY_PER_SECOND: '0',
    RATE_LIMIT_ORG_PER_SECOND: '0',
    MAX_QUEUED_RUNS_PER_ORG: '10000000',
    ...env,
  });
  const [, url = ''] = await service.waitForStdout(LISTENING, timeoutMs);
  return {
    child: service.child,
    url,
    output: () => `${service.stdout()}\n${service.stderr()}`,
    exited: service.exited.then((exit) => exit.code ?? exit.signal ?? 'unknown'),
  };
}
