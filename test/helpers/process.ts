// Child processes for end-to-end tests: the real service entry point and the `dialtone` command,
// run the way a user runs them, with an environment built from scratch (nothing leaks in from the
// test runner's own environment) and killed when the test ends.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { scaledTimeout } from './timeouts.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The minimum a child needs from the runner's environment, plus the given variables. */
export function childEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  if (process.env.TMPDIR) out.TMPDIR = process.env.TMPDIR;
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

/**
 * How long a child may take to print what a test waits for (the service's banner or "listening"
 * line). A bound, not a measurement: no test asserts how fast a process starts. 20 s was not
 * enough for three service processes starting at once on a 2-core machine under load (seen in
 * multi-node.test.ts: nothing at all on stdout after 20 s). The waits scale it further by the
 * machine's load (helpers/timeouts.ts).
 */
export const STARTUP_TIMEOUT_MS = 90_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  /** Resolves with the first match of `pattern` in stdout; rejects on timeout or exit. */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Waits for the exit; rejects when the process is still running after `timeoutMs`. */
  waitForExit(timeoutMs: number): Promise<Exit>;
  /** Sends a signal and waits for the exit, as waitForExit. */
  stop(signal: NodeJS.Signals, timeoutMs: number): Promise<Exit>;
}

/**
 * Starts `command args` and kills it (SIGKILL) when the test ends, if it is still running. With
 * `processGroup`, the child leads a process group of its own and the whole group is killed: what it
 * started (npm's node) goes too, even when the child itself exited without stopping it.
 */
export function startProcess(t: TestContext, command: string, args: string[], env: Record<string, string | undefined>, options: SpawnOptions = {}): RunningProcess {
  const started = spawnProcess(command, args, env, options);
  t.after(async () => {
    const pid = started.child.pid;
    if (options.processGroup && pid !== undefined) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
    if (started.child.exitCode !== null || started.child.signalCode !== null) return;
    started.child.kill('SIGKILL');
    await started.exited;
  });
  return started;
}

/**
 * Ends a helper daemon a test started itself (a SIP peer, a proxy) when the test ends: SIGTERM, then
 * SIGKILL if it is still up after `graceMs`; then removes its working directory. Call it right after
 * the spawn, so its exit is never missed.
 */
export function stopOnTeardown(t: TestContext, child: ChildProcess, options: { dir?: string; graceMs?: number } = {}): void {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), options.graceMs ?? 3_000);
      await exited;
      clearTimeout(killer);
    }
    if (options.dir !== undefined) rmSync(options.dir, { recursive: true, force: true });
  });
}

export interface SpawnOptions {
  /**
   * Where stdout goes instead of a pipe to this process: a file (emptied first) the child writes directly. The
   * benchmark uses it, so that collecting a busy service's log lines (one per request) costs no CPU
   * in the process that measures it, on a machine with few cores.
   */
  stdoutFile?: string;
  /** Start the child as the leader of a new process group (see startProcess). */
  processGroup?: boolean;
}

/** How often `waitForStdout` rereads a stdout file; only startup lines are waited for this way. */
const STDOUT_FILE_POLL_MS = 50;

/** Starts `command args`; the caller owns its end (outside a test, e.g. the benchmark). */
export function spawnProcess(command: string, args: string[], env: Record<string, string | undefined>, options: SpawnOptions = {}): RunningProcess {
  const { stdoutFile, processGroup = false } = options;
  const stdoutFd = stdoutFile === undefined ? undefined : openSync(stdoutFile, 'w');
  const child = spawn(command, args, { cwd: ROOT, env: childEnv(env), stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'], detached: processGroup });
  // The child holds its own descriptor of the file now.
  if (stdoutFd !== undefined) closeSync(stdoutFd);
  let piped = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (piped += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const stdout = () => (stdoutFile === undefined ? piped : readFileSync(stdoutFile, 'utf8'));
  let done: Exit | undefined;
  const exited = new Promise<Exit>((resolve) =>
    child.on('exit', (code, signal) => {
      done = { code, signal };
      resolve(done);
    }),
  );
  const describe = () => `stdout:\n${stdout()}\nstderr:\n${stderr}`;

  return {
    child,
    stdout,
    stderr: () => stderr,
    exited,
    waitForStdout(pattern, timeoutMs = scaledTimeout(STARTUP_TIMEOUT_MS)) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(stdout());
          if (!match) return false;
          cleanup();
          resolve(match);
          return true;
        };
        const onExit = () => {
          if (check()) return;
          cleanup();
          reject(new Error(`process exited (${JSON.stringify(done)}) before printing ${pattern}:\n${describe()}`));
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no ${pattern} on stdout within ${timeoutMs} ms:\n${describe()}`));
        }, timeoutMs);
        let poll: NodeJS.Timeout | undefined;
        const cleanup = () => {
          clearTimeout(timer);
          clearInterval(poll);
          child.stdout?.off('data', check);
          child.off('exit', onExit);
        };
        if (check()) return;
        if (done) return onExit();
        if (stdoutFile === undefined) child.stdout?.on('data', check);
        else poll = setInterval(check, STDOUT_FILE_POLL_MS);
        child.on('exit', onExit);
      });
    },
    waitForExit,
    stop(signal, timeoutMs) {
      if (!done) child.kill(signal);
      return waitForExit(timeoutMs);
    },
  };

  async function waitForExit(timeoutMs: number): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`process still running after ${timeoutMs} ms:\n${describe()}`)), timeoutMs);
    });
    try {
      return await Promise.race([exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

let built = false;

/**
 * Builds dist/ if the sources changed since (once per test process; a fresh `npm ci` has built it
 * already). The service and the `dialtone` command then run compiled code: on stale sources
 * bin/dialtone compiles them through tsx at every start, seconds of CPU per command, which a test
 * file running dozens of commands on a loaded machine turned into commands past their time bound.
 */
export function ensureBuilt(): void {
  if (built) return;
  const build = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`building dist/ failed:\n${build.stdout}${build.stderr}`);
  built = true;
}

/**
 * The command line of `npm start`, from package.json, as node arguments (`node <these>`). It runs
 * the compiled service in dist/; like npm's prestart, this first builds it if stale (ensureBuilt).
 */
export function npmStartArgs(): string[] {
  ensureBuilt();
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
  // `exec` only makes npm's shell become node (so signals reach it); the command is what follows.
  const [command, ...args] = pkg.scripts.start.replace(/^exec\s+/, '').split(/\s+/);
  if (command !== 'node') throw new Error(`npm start is not a plain node command: ${pkg.scripts.start}`);
  return args;
}

/** Starts the service the way `npm start` does. */
export function startService(t: TestContext, env: Record<string, string | undefined>): RunningProcess {
  return startProcess(t, process.execPath, npmStartArgs(), env);
}

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion (killed after `timeoutMs`, 30 s on an idle machine, scaled by
 * helpers/timeouts.ts) and returns its exit code and output.
 */
export function runToCompletion(command: string, args: string[], env: Record<string, string | undefined>, timeoutMs = scaledTimeout(30_000)): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
