// baresip (Debian package baresip-core) as the callee: a real SIP user agent nobody here wrote,
// answering automatically on 127.0.0.5 with ephemeral ports, its configuration written into a
// temporary directory, and hung up on command through its ctrl_tcp module. Optional: without it
// the tests that use it are skipped with the reason, unless DIALTONE_TEST_REQUIRE_BARESIP=1.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { pcmWav } from './audio.js';
import { stopOnTeardown } from './process.js';
import { scaledTimeout } from './timeouts.js';
import { createSocket } from 'node:dgram';

export const BARESIP_ADDRESS = '127.0.0.5';
/** The user part baresip answers for: the number the tests dial. */
export const BARESIP_USER = '+12025550123';

export function baresipSkip(): string | false {
  const probe = spawnSync('baresip', ['-h'], { encoding: 'utf8' });
  const reason = probe.error ? `baresip is not installed (${probe.error.message}); install the Debian package baresip-core` : false;
  if (reason && process.env.DIALTONE_TEST_REQUIRE_BARESIP === '1') throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_BARESIP=1 forbids skipping the baresip tests`);
  if (reason) process.stderr.write(`# skipping baresip tests: ${reason}\n`);
  return reason;
}

async function freePort(kind: 'tcp' | 'udp'): Promise<number> {
  if (kind === 'tcp') {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, BARESIP_ADDRESS, resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, BARESIP_ADDRESS, resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

export interface Baresip {
  port: number;
  output(): string;
  /** Hangs up its call (ctrl_tcp "hangup"). */
  hangUp(): Promise<void>;
  /** Runs one of its menu commands through ctrl_tcp (`sndcode` with digits sends them as RFC 4733 events). */
  command(name: string, params?: string): Promise<void>;
  /** Resolves when its output matches `pattern`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
}

export interface BaresipOptions {
  /** A mono 16-bit WAV at 8 kHz it plays as its microphone once a call is up (default: 10 s of silence). */
  source?: string;
  /** A directory where its sndfile module writes what it hears (`dump-…-dec.wav`) and says (`-enc.wav`); default: nowhere. */
  record?: string;
  /** The only G.711 law it answers with (default: both, PCMU first). */
  codec?: 'PCMU' | 'PCMA';
}

export async function startBaresip(t: TestContext, options: BaresipOptions = {}): Promise<Baresip> {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-baresip-'));
  const port = await freePort('udp');
  const ctrlPort = await freePort('tcp');
  // Each check frees its port before returning, so the next may be handed the same one again: the
  // RTP range (below, ten ports from `rtp`) must not hold the SIP port.
  let rtp = await freePort('udp');
  while (port >= rtp && port <= rtp + 9) rtp = await freePort('udp');
  writeFileSync(
    join(dir, 'config'),
    [
      `sip_listen ${BARESIP_ADDRESS}:${port}`,
      `net_interface ${BARESIP_ADDRESS}`,
      'sip_trans_def udp',
      'audio_player aufile,/dev/null',
      // Its sine source needs 48 kHz; a file at 8 kHz (PCMU's rate) needs no resampling.
      `audio_source aufile,${options.source ?? join(dir, 'silence.wav')}`,
      'audio_alert aufile,/dev/null',
      'module_path /usr/lib/baresip/modules',
      'module g711.so',
      'module aufile.so',
      'module ctrl_tcp.so',
      ...(options.record ? ['module sndfile.so', `snd_path ${options.record}`] : []),
      'module account.so',
      // ctrl_tcp runs the commands other modules register: `hangup` is menu's.
      'module menu.so',
      `ctrl_tcp_listen ${BARESIP_ADDRESS}:${ctrlPort}`,
      // A few ports, not two: another process may take one between the probe above and baresip binding it.
      `rtp_ports ${rtp}-${rtp + 9}`,
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'silence.wav'), pcmWav(new Int16Array(8000 * 10)));
  const codecs = options.codec ? `;audio_codecs=${options.codec.toLowerCase()}` : '';
  writeFileSync(join(dir, 'accounts'), `<sip:${BARESIP_USER}@${BARESIP_ADDRESS}>;regint=0;answermode=auto${codecs}\n`);
  const child = spawn('baresip', ['-f', dir, '-v'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-100_000)));
  child.stderr.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-100_000)));
  stopOnTeardown(t, child, { dir });
  const waitFor = async (pattern: RegExp, timeoutMs = scaledTimeout(10_000)) => {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(log)) {
      if (child.exitCode !== null) throw new Error(`baresip exited with ${child.exitCode}:\n${log.slice(-3000)}`);
      if (Date.now() > deadline) throw new Error(`baresip never printed ${pattern}:\n${log.slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  await waitFor(/baresip is ready/);
  const command = async (name: string, params?: string) => {
    // ctrl_tcp takes JSON commands framed as netstrings ("<length>:<bytes>,").
    const text = JSON.stringify({ command: name, ...(params !== undefined ? { params } : {}), token: 'dialtone' });
    const socket = connect(ctrlPort, BARESIP_ADDRESS);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.end(`${Buffer.byteLength(text)}:${text},`);
  };
  return {
    port,
    output: () => log,
    waitFor,
    hangUp: () => command('hangup'),
    command,
  };
}
