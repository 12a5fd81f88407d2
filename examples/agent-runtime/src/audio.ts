// Audio for the example runtime: the Media Streams protocol carries 8 kHz μ-law, so the greeting is
// made into that (espeak-ng's speech resampled here, or a generated tone prompt), and what the callee
// says is written to a WAV file as it arrives. μ-law ↔ linear is the `alawmulaw` package's.
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import alawmulaw from 'alawmulaw';

const { mulaw } = alawmulaw;

export const SAMPLE_RATE = 8000;

/** The greeting as 8 kHz μ-law, and how it was made. */
export interface Prompt {
  mulaw: Uint8Array;
  voice: 'espeak-ng' | 'tone';
}

/**
 * `text` spoken by espeak-ng (Debian's `espeak-ng` package) when it is installed and `useSpeech`
 * allows it; otherwise a tone prompt (three rising beeps), so the example works without it.
 */
export function greetingPrompt(text: string, useSpeech = true): Prompt {
  if (useSpeech) {
    const speech = spawnSync('espeak-ng', ['--stdout', '-s', '160', text], { maxBuffer: 64 * 1024 * 1024 });
    if (!speech.error && speech.status === 0 && speech.stdout.length > 44) {
      const wav = parseWav(speech.stdout);
      if (wav) return { mulaw: mulaw.encode(resample(wav.samples, wav.rate, SAMPLE_RATE)), voice: 'espeak-ng' };
    }
  }
  return { mulaw: mulaw.encode(tonePrompt()), voice: 'tone' };
}

/** Three 200 ms beeps (523, 659, 784 Hz) with 100 ms between them: a prompt anyone can hear is a greeting. */
export function tonePrompt(): Int16Array {
  const beepSamples = 0.2 * SAMPLE_RATE;
  const gapSamples = 0.1 * SAMPLE_RATE;
  const frequencies = [523, 659, 784];
  const samples = new Int16Array(frequencies.length * (beepSamples + gapSamples));
  frequencies.forEach((frequency, index) => {
    const offset = index * (beepSamples + gapSamples);
    for (let n = 0; n < beepSamples; n++) samples[offset + n] = Math.round(12_000 * Math.sin((2 * Math.PI * frequency * n) / SAMPLE_RATE));
  });
  return samples;
}

/**
 * A mono 16-bit PCM WAV's samples and rate. espeak-ng writing to a pipe cannot know its length, so
 * it writes a huge data size: the data is what the file holds.
 */
export function parseWav(file: Buffer): { samples: Int16Array; rate: number } | undefined {
  if (file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') return undefined;
  let rate: number | undefined;
  for (let offset = 12; offset + 8 <= file.length; ) {
    const id = file.toString('ascii', offset, offset + 4);
    const size = file.readUInt32LE(offset + 4);
    if (id === 'fmt ') {
      const channels = file.readUInt16LE(offset + 10);
      const bits = file.readUInt16LE(offset + 22);
      if (file.readUInt16LE(offset + 8) !== 1 || channels !== 1 || bits !== 16) return undefined;
      rate = file.readUInt32LE(offset + 12);
    } else if (id === 'data' && rate !== undefined) {
      const end = Math.min(file.length, offset + 8 + size);
      const data = file.subarray(offset + 8, end - ((end - offset - 8) % 2));
      const samples = new Int16Array(data.length / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = data.readInt16LE(i * 2);
      return { samples, rate };
    }
    offset += 8 + size + (size % 2);
  }
  return undefined;
}

/**
 * `samples` at `from` Hz as `to` Hz: each output sample the mean of the input samples its period
 * covers (a box filter, enough against aliasing for speech going down to telephone quality).
 */
export function resample(samples: Int16Array, from: number, to: number): Int16Array {
  if (from === to) return samples;
  const out = new Int16Array(Math.floor((samples.length * to) / from));
  const step = from / to;
  for (let i = 0; i < out.length; i++) {
    const start = Math.floor(i * step);
    const end = Math.max(start + 1, Math.min(samples.length, Math.floor((i + 1) * step)));
    let sum = 0;
    for (let j = start; j < end; j++) sum += samples[j] ?? 0;
    out[i] = Math.round(sum / (end - start));
  }
  return out;
}

/** Mean absolute amplitude of μ-law audio: speech or a tone is in the thousands, silence near 0. */
export function loudness(frame: Uint8Array): number {
  const linear = mulaw.decode(frame);
  let sum = 0;
  for (const sample of linear) sum += Math.abs(sample);
  return linear.length === 0 ? 0 : sum / linear.length;
}

/** A 16-bit 8 kHz mono WAV written as audio arrives, its sizes filled in when closed. */
export class WavWriter {
  private fd: number | undefined;
  private samples = 0;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
    writeSync(this.fd, header(0));
  }

  /** Seconds written so far. */
  get seconds(): number {
    return this.samples / SAMPLE_RATE;
  }

  writeMulaw(bytes: Uint8Array): void {
    if (this.fd === undefined) return;
    const linear = mulaw.decode(bytes);
    writeSync(this.fd, Buffer.from(linear.buffer, linear.byteOffset, linear.byteLength));
    this.samples += linear.length;
  }

  close(): void {
    if (this.fd === undefined) return;
    writeSync(this.fd, header(this.samples), 0, 44, 0);
    closeSync(this.fd);
    this.fd = undefined;
  }
}

function header(samples: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + samples * 2, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(SAMPLE_RATE, 24);
  h.writeUInt32LE(SAMPLE_RATE * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(samples * 2, 40);
  return h;
}
