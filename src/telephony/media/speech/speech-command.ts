// Speech for a provider that plays its own audio (a message left on a SIP call's voicemail): an
// operator-chosen text-to-speech command (SIP_SPEECH_COMMAND, e.g. Debian's `espeak-ng --stdin
// --stdout`) turns the rendered message into a WAV file, which wav-to-mulaw.ts makes the call's
// 8 kHz μ-law.
//
// The message holds the callee's own context (user data), so it never touches a command line: the
// command is split into argv once, at start-up, and run without a shell; the text goes on its
// standard input. Its output is bounded (the most bytes taken, then it is killed) and so is its
// time (killed at the timeout): a stuck or runaway synthesizer ends one call's message, never the
// process. What it printed on standard error is kept (its end) for the operator's log only: it
// may quote the message.
import { spawn } from 'node:child_process';
import { TimeoutError, wavToMulaw } from './wav-to-mulaw.js';

export interface SpeechSettings {
  /** The command and its arguments (parseSpeechCommand). */
  argv: readonly string[];
  /** How long the command and the conversion may take together (SIP_SPEECH_TIMEOUT_MS). */
  timeoutMs: number;
  /** The most bytes of WAV taken from the command (SIP_SPEECH_MAX_BYTES). */
  maxBytes: number;
}

/** Why speech could not be had: a short machine word (kept in the run's raw status) and the detail. */
export type SpeechFailure = 'speech_command_unavailable' | 'speech_command_failed' | 'speech_timeout' | 'speech_too_large' | 'speech_unreadable';

export class SpeechError extends Error {
  constructor(
    readonly failure: SpeechFailure,
    message: string,
    /** The end of what the command wrote on standard error: for the operator's log, never the run (it may quote the message). */
    readonly stderr = '',
  ) {
    super(message);
    this.name = 'SpeechError';
  }
}

/**
 * The characters a shell would give meaning to. The command is run without one, so they would be
 * passed literally, which is never what was meant: refused at start-up (config.ts's pattern) rather
 * than surprising at the first message.
 */
export const SPEECH_COMMAND_PATTERN = '^[^"\'`$\\\\|&;<>(){}*?!~\\n\\r]+$';

/** argv of a command line: words separated by white space, no quoting (SPEECH_COMMAND_PATTERN refuses quotes). */
export function parseSpeechCommand(line: string): string[] {
  return line.split(/\s+/).filter((word) => word !== '');
}

function kill(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Bytes of standard error kept for the log. */
const STDERR_KEPT = 500;

/** Runs the command on `text` and returns its WAV, converted: μ-law at 8 kHz. Throws SpeechError. */
export async function synthesize(text: string, settings: SpeechSettings): Promise<Uint8Array> {
  const deadline = Date.now() + settings.timeoutMs;
  const wav = await runCommand(text, settings);
  const remaining = deadline - Date.now();
  if (remaining <= 0) throw new SpeechError('speech_timeout', `speech synthesis took longer than ${settings.timeoutMs} ms`);
  return wavToMulaw(wav, remaining).catch((error: unknown) => {
    if (error instanceof TimeoutError) throw new SpeechError('speech_timeout', `speech synthesis took longer than ${settings.timeoutMs} ms (converting its audio)`);
    throw new SpeechError('speech_unreadable', `the speech command's output is not a WAV file that can be played: ${(error as Error).message}`);
  });
}

function runCommand(text: string, settings: SpeechSettings): Promise<Buffer> {
  const [command, ...args] = settings.argv;
  if (!command) return Promise.reject(new SpeechError('speech_command_unavailable', 'no speech command is set'));
  return new Promise((resolve, reject) => {
    // No shell (spawn's default), nothing of the message in argv. Its own process group, so a
    // wrapper script's children are killed with it (one left behind would hold the pipes open).
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const chunks: Buffer[] = [];
    let bytes = 0;
    let stderr = '';
    let settled = false;
    const fail = (error: SpeechError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      kill(child.pid);
      reject(new SpeechError(error.failure, error.message, stderr));
    };
    const timer = setTimeout(() => fail(new SpeechError('speech_timeout', `the speech command did not finish within ${settings.timeoutMs} ms`)), settings.timeoutMs);
    child.on('error', (error) => fail(new SpeechError('speech_command_unavailable', `the speech command "${command}" could not be run: ${error.message}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > settings.maxBytes) return fail(new SpeechError('speech_too_large', `the speech command wrote more than ${settings.maxBytes} bytes (SIP_SPEECH_MAX_BYTES)`));
      chunks.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-STDERR_KEPT)));
    // A command that exits without reading its input closes the pipe: EPIPE here, its exit status below.
    child.stdin.on('error', () => undefined);
    child.stdin.end(text);
    child.on('close', (code, signal) => {
      if (settled) return;
      if (code !== 0) return fail(new SpeechError('speech_command_failed', `the speech command exited with ${code === null ? `signal ${signal}` : `status ${code}`}`));
      settled = true;
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
}
