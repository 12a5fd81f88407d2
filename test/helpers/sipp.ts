// SIPp (Debian package sip-tester) as the far end of SIP tests: a real SIP peer running the
// scenario files in test/sipp/, on 127.0.0.2 (Dialtone's stack is on 127.0.0.1: the sip package
// treats a request to its own address as local). Without sipp the tests are skipped with the reason,
// unless DIALTONE_TEST_REQUIRE_SIPP=1 (set by .ci/run) turns the skip into a failure.
import { spawn, spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { ROOT } from './process.js';

export const SIPP_ADDRESS = '127.0.0.2';
export const DIALTONE_SIP_ADDRESS = '127.0.0.1';

export function sippSkip(): string | false {
  const probe = spawnSync('sipp', ['-v'], { encoding: 'utf8' });
  const reason = probe.error ? `sipp is not installed (${probe.error.message}); install the Debian package sip-tester` : false;
  if (reason && process.env.DIALTONE_TEST_REQUIRE_SIPP === '1') throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_SIPP=1 forbids skipping SIP tests`);
  if (reason) process.stderr.write(`# skipping SIP tests: ${reason}\n`);
  return reason;
}

/**
 * A BYE from a stranger at 127.0.0.3 (no dialog of Dialtone's: forged tags), to Dialtone's SIP port
 * over `transport`: Dialtone must answer 481 and end nothing. `callId` defaults to one that is no call's.
 */
export function strangerBye(options: { transport: 'udp' | 'tcp'; dialtonePort: number; strangerPort: number; branch: string; callId?: string }): string {
  const uriTransport = options.transport === 'udp' ? '' : `;transport=${options.transport}`;
  return [
    `BYE sip:dialtone@${DIALTONE_SIP_ADDRESS}:${options.dialtonePort}${uriTransport} SIP/2.0`,
    `Via: SIP/2.0/${options.transport.toUpperCase()} 127.0.0.3:${options.strangerPort};branch=${options.branch}`,
    'From: <sip:mallory@127.0.0.3>;tag=forged',
    `To: <sip:dialtone@${DIALTONE_SIP_ADDRESS}>;tag=unknown`,
    `Call-ID: ${options.callId ?? 'not-a-call-of-ours@127.0.0.3'}`,
    'CSeq: 1 BYE',
    'Max-Forwards: 70',
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
}

/** A UDP port free on `address` right now. */
export async function freeUdpPort(address: string): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

export interface Sipp {
  port: number;
  /** Resolves with SIPp's exit code: 0 when the scenario ran to its end. */
  exited: Promise<number | null>;
  /** SIPp's own messages and the scenario's <log> lines, for assertions and failure reports. */
  output(): string;
}

export interface SippOptions {
  /** `-key name value` pairs for [name] in the scenario. */
  keys?: Record<string, string>;
  /** Replacements in the scenario file itself, for what SIPp will not take as a key (status lines). */
  replace?: Record<string, string>;
}

export async function startSipp(t: TestContext, scenario: string, options: SippOptions = {}): Promise<Sipp> {
  const port = await freeUdpPort(SIPP_ADDRESS);
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-sipp-'));
  let scenarioFile = join(ROOT, 'test', 'sipp', scenario);
  if (options.replace) {
    let text = readFileSync(scenarioFile, 'utf8');
    for (const [from, to] of Object.entries(options.replace)) text = text.split(from).join(to);
    scenarioFile = join(dir, scenario);
    writeFileSync(scenarioFile, text);
  }
  const args = ['-sf', scenarioFile, '-i', SIPP_ADDRESS, '-p', String(port), '-m', '1', '-timeout', '20s', '-timeout_error', '-nostdin'];
  args.push('-trace_err', '-error_file', join(dir, 'errors.log'), '-trace_logs', '-log_file', join(dir, 'scenario.log'));
  for (const [name, value] of Object.entries(options.keys ?? {})) args.push('-key', name, value);
  const child = spawn('sipp', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let console = '';
  child.stdout.on('data', (chunk: Buffer) => (console = (console + chunk.toString()).slice(-20_000)));
  child.stderr.on('data', (chunk: Buffer) => (console += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });
  const read = (file: string) => {
    try {
      return readFileSync(join(dir, file), 'utf8');
    } catch {
      return '';
    }
  };
  // SIPp binds before it reads its first message; give it a moment to be listening.
  await new Promise((resolve) => setTimeout(resolve, 300));
  return { port, exited, output: () => `${read('scenario.log')}\n${read('errors.log')}\n${console.slice(-3000)}` };
}
