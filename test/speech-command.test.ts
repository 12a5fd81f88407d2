// The speech command a message left on a SIP voicemail is spoken with (src/telephony/media/speech/):
// run without a shell with the text on its standard input, bounded in time and bytes, every failure
// a SpeechError saying which; and its WAV made the call's 8 kHz μ-law (wavefile, wave-resampler in
// a worker thread, alawmulaw), checked on audio sox and espeak-ng make.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import alawmulaw from 'alawmulaw';
import { ConfigError, loadConfig } from '../src/config.js';
import { parseSpeechCommand, SpeechError, synthesize, type SpeechSettings } from '../src/telephony/media/speech/speech-command.js';
import { wavToMulaw } from '../src/telephony/media/speech/wav-to-mulaw.js';
import { dominantFrequency, pcmWav, soxSkip } from './helpers/audio.js';
import { scaledTimeout } from './helpers/timeouts.js';

const dir = mkdtempSync(join(tmpdir(), 'dialtone-speech-'));

/** A speech command of the test's own: it keeps its argv and standard input, and writes `wav` as its output. */
function fakeSynthesizer(wav: Buffer): { command: string; argvFile: string; stdinFile: string } {
  const wavFile = join(dir, `out-${Math.random().toString(36).slice(2)}.wav`);
  writeFileSync(wavFile, wav);
  const argvFile = `${wavFile}.argv`;
  const stdinFile = `${wavFile}.stdin`;
  const script = `${wavFile}.sh`;
  writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$@" > ${argvFile}\ncat > ${stdinFile}\ncat ${wavFile}\n`);
  chmodSync(script, 0o755);
  return { command: script, argvFile, stdinFile };
}

const settings = (command: string, more: Partial<SpeechSettings> = {}): SpeechSettings => ({ argv: parseSpeechCommand(command), timeoutMs: scaledTimeout(10_000), maxBytes: 8_000_000, ...more });

async function failure(promise: Promise<unknown>): Promise<SpeechError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof SpeechError, String(error));
    return error;
  }
  assert.fail('it resolved');
}

/** A second of a sine at `frequency` Hz, as 16-bit samples at `rate`. */
function sine(frequency: number, rate: number, seconds = 1): Int16Array {
  return Int16Array.from({ length: rate * seconds }, (_, i) => Math.round(12_000 * Math.sin((2 * Math.PI * frequency * i) / rate)));
}

describe('the speech command', () => {
  it('gets the message on its standard input, never in its argv, and no shell reads it', async () => {
    const fake = fakeSynthesizer(pcmWav(sine(440, 8000)));
    const message = 'Hi $(touch /tmp/dialtone-speech-pwned) `id`; rm -rf / | cat & "quoted" \'too\' {{name}}';
    const mulaw = await synthesize(message, settings(`${fake.command} --voice en-us`));
    assert.equal(mulaw.length, 8000);
    assert.equal(readFileSync(fake.stdinFile, 'utf8'), message);
    assert.deepEqual(readFileSync(fake.argvFile, 'utf8').trim().split('\n'), ['--voice', 'en-us']);
    assert.equal(existsSync('/tmp/dialtone-speech-pwned'), false);
  });

  it('splits the command at white space, no more', () => {
    assert.deepEqual(parseSpeechCommand('  espeak-ng   --stdin\t--stdout '), ['espeak-ng', '--stdin', '--stdout']);
  });

  it('is refused at start-up with quotes or shell characters, which would be passed literally', () => {
    for (const value of ['espeak-ng -v "en-us"', 'espeak-ng | sox', 'tts $VOICE', 'tts; rm', 'tts > out.wav', '~/bin/tts']) {
      assert.throws(() => loadConfig({ SIP_SPEECH_COMMAND: value }), (error: unknown) => error instanceof ConfigError && error.problems.some((p) => p.startsWith('SIP_SPEECH_COMMAND')), value);
    }
    assert.equal(loadConfig({ SIP_SPEECH_COMMAND: '/usr/bin/espeak-ng --stdin --stdout -v en-us' }).SIP_SPEECH_COMMAND, '/usr/bin/espeak-ng --stdin --stdout -v en-us');
    assert.equal(loadConfig({}).SIP_SPEECH_COMMAND, undefined);
  });

  it('says why when the command cannot be run, fails, is too slow, writes too much or writes no WAV', async () => {
    assert.equal((await failure(synthesize('x', settings('/nonexistent/tts')))).failure, 'speech_command_unavailable');
    const failed = await failure(synthesize('x', settings('false')));
    assert.equal(failed.failure, 'speech_command_failed');
    assert.equal(failed.message, 'the speech command exited with status 1');
    const began = Date.now();
    const slow = await failure(synthesize('x', settings('sleep 30', { timeoutMs: 300 })));
    assert.equal(slow.failure, 'speech_timeout');
    assert.ok(Date.now() - began < scaledTimeout(5_000), 'given up at the timeout, not when the command ended');
    const large = await failure(synthesize('x', settings('cat /dev/zero', { maxBytes: 100_000 })));
    assert.equal(large.failure, 'speech_too_large');
    assert.equal((await failure(synthesize('x', settings('echo not a wav')))).failure, 'speech_unreadable');
    const empty = fakeSynthesizer(pcmWav(new Int16Array(0)));
    assert.equal((await failure(synthesize('x', settings(empty.command)))).failure, 'speech_unreadable');
  });

  it('keeps the end of what the command wrote on standard error, for the log', async () => {
    const script = join(dir, 'complains.sh');
    writeFileSync(script, '#!/bin/sh\necho "voice not found: en-zz" >&2\nexit 3\n');
    chmodSync(script, 0o755);
    const error = await failure(synthesize('x', settings(script)));
    assert.equal(error.message, 'the speech command exited with status 3');
    assert.match(error.stderr, /voice not found: en-zz/);
  });
});

describe('a speech command\'s WAV as a call\'s audio', { skip: soxSkip() }, () => {
  it('resamples 16-bit audio at 22,050 Hz (espeak-ng\'s rate) to 8 kHz μ-law, the tone kept', async () => {
    const mulaw = await wavToMulaw(pcmWav(sine(700, 22_050, 2), 22_050), scaledTimeout(10_000));
    assert.ok(Math.abs(mulaw.length - 16_000) <= 2, `${mulaw.length} samples`);
    assert.deepEqual(dominantFrequency(alawmulaw.mulaw.decode(mulaw.subarray(4000, 12_000)), [440, 700, 1000, 1700]), { frequency: 700, clear: true });
  });

  it('filters out what lies above the phone\'s band instead of folding it back into it', async () => {
    // 6 kHz at 22,050 Hz would alias to 2 kHz at 8 kHz without the low-pass filter.
    const mulaw = await wavToMulaw(pcmWav(sine(6000, 22_050, 1), 22_050), scaledTimeout(10_000));
    const linear = alawmulaw.mulaw.decode(mulaw.subarray(800, 7200));
    const rms = Math.sqrt(linear.reduce((sum, s) => sum + s * s, 0) / linear.length);
    assert.ok(rms < 500, `the out-of-band tone is gone (RMS ${rms.toFixed(0)} of 8485)`);
  });

  it('reads stereo float WAV at 44.1 kHz, and μ-law WAV at 8 kHz as it is', async () => {
    const stereo = join(dir, 'stereo.wav');
    assert.equal(spawnSync('sox', ['-n', '-r', '44100', '-c', '2', '-e', 'floating-point', '-b', '32', stereo, 'synth', '1', 'sine', '1000', 'vol', '0.5']).status, 0);
    const fromStereo = await wavToMulaw(readFileSync(stereo), scaledTimeout(10_000));
    assert.ok(Math.abs(fromStereo.length - 8000) <= 2);
    assert.equal(dominantFrequency(alawmulaw.mulaw.decode(fromStereo.subarray(2000, 6000)), [440, 1000, 1700]).frequency, 1000);
    const ulaw = join(dir, 'ulaw.wav');
    assert.equal(spawnSync('sox', ['-n', '-r', '8000', '-c', '1', '-e', 'mu-law', ulaw, 'synth', '1', 'sine', '440', 'vol', '0.5']).status, 0);
    const fromUlaw = await wavToMulaw(readFileSync(ulaw), scaledTimeout(10_000));
    assert.equal(fromUlaw.length, 8000);
    assert.equal(dominantFrequency(alawmulaw.mulaw.decode(fromUlaw.subarray(2000, 6000)), [440, 1000, 1700]).frequency, 440);
  });

  it('takes espeak-ng\'s output as it writes it to a pipe (its header says 2 GB of data): as long as sox says it is', { skip: spawnSync('espeak-ng', ['--version']).error ? 'espeak-ng is not installed' : false }, async () => {
    const text = 'This is Acme about your appointment. Please call us back.';
    const mulaw = await synthesize(text, settings('espeak-ng --stdin --stdout'));
    const wav = join(dir, 'espeak.wav');
    writeFileSync(wav, spawnSync('espeak-ng', ['--stdin', '--stdout'], { input: text }).stdout);
    const seconds = Number(/Length \(seconds\):\s+([\d.]+)/.exec(spawnSync('sox', [wav, '-n', 'stat'], { encoding: 'utf8' }).stderr)?.[1]);
    assert.ok(Math.abs(mulaw.length / 8000 - seconds) < 0.01, `${mulaw.length / 8000} s, sox says ${seconds} s`);
  });
});
