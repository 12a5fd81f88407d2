// Audio for the media tests: tones made by sox (Debian package sox) at test time, WAV files written
// and read back, and the dominant frequency of a stretch of samples (the Goertzel algorithm at each
// candidate frequency), so a test can tell which callee's tone a stream carries.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import alawmulaw from 'alawmulaw';

export function soxSkip(): string | false {
  const probe = spawnSync('sox', ['--version'], { encoding: 'utf8' });
  const reason = probe.error ? `sox is not installed (${probe.error.message}); install the Debian package sox` : false;
  if (reason && process.env.DIALTONE_TEST_REQUIRE_BARESIP === '1') throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_BARESIP=1 forbids skipping the media tests`);
  if (reason) process.stderr.write(`# skipping media tests: ${reason}\n`);
  return reason;
}

/** A mono 16-bit 8 kHz WAV of a sine at `frequency` Hz, written by sox. */
export function toneWav(path: string, frequency: number, seconds: number): void {
  const result = spawnSync('sox', ['-n', '-r', '8000', '-c', '1', '-b', '16', path, 'synth', String(seconds), 'sine', String(frequency), 'vol', '0.5'], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`sox failed: ${result.stderr}`);
}

/** Raw μ-law (8 kHz) of a sine at `frequency` Hz, written by sox. */
export function toneMulaw(frequency: number, seconds: number): Buffer {
  const result = spawnSync('sox', ['-n', '-r', '8000', '-c', '1', '-e', 'mu-law', '-t', 'raw', '-', 'synth', String(seconds), 'sine', String(frequency), 'vol', '0.5']);
  if (result.status !== 0) throw new Error(`sox failed: ${result.stderr.toString()}`);
  return result.stdout;
}

/** A mono 16-bit PCM WAV file of `samples` at `rate` Hz (what baresip plays, what the simulator reads). */
export function pcmWav(samples: Int16Array, rate = 8000): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + samples.byteLength, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(samples.byteLength, 40);
  return Buffer.concat([header, Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength)]);
}

/** The 16-bit samples of a PCM WAV file (its `data` chunk). */
export function readWavSamples(path: string): Int16Array {
  const file = readFileSync(path);
  let offset = 12;
  while (offset + 8 <= file.length) {
    const id = file.toString('ascii', offset, offset + 4);
    const size = file.readUInt32LE(offset + 4);
    if (id === 'data') {
      const length = Math.min(size, file.length - offset - 8);
      const copy = Buffer.from(file.subarray(offset + 8, offset + 8 + length - (length % 2)));
      return new Int16Array(copy.buffer, copy.byteOffset, copy.length / 2);
    }
    offset += 8 + size + (size % 2);
  }
  return new Int16Array(0);
}

export const decodeMulaw = (bytes: Uint8Array): Int16Array => alawmulaw.mulaw.decode(bytes);

/** Power of `samples` at `frequency` (Goertzel). */
function power(samples: Int16Array, frequency: number, rate: number): number {
  const coefficient = 2 * Math.cos((2 * Math.PI * frequency) / rate);
  let s1 = 0;
  let s2 = 0;
  for (const sample of samples) {
    const s0 = sample + coefficient * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coefficient * s1 * s2;
}

/** Which of `candidates` carries the most power in `samples`, and whether it stands out (10× the next). */
export function dominantFrequency(samples: Int16Array, candidates: readonly number[], rate = 8000): { frequency: number; clear: boolean } {
  const powers = candidates.map((frequency) => ({ frequency, power: power(samples, frequency, rate) })).sort((a, b) => b.power - a.power);
  const [first, second] = powers;
  return { frequency: first?.frequency ?? 0, clear: first !== undefined && (second === undefined || first.power > 10 * second.power) };
}

/** Mean absolute amplitude: above a few hundred is a tone at our volume, near 0 is silence. */
export function loudness(samples: Int16Array): number {
  let sum = 0;
  for (const sample of samples) sum += Math.abs(sample);
  return samples.length === 0 ? 0 : sum / samples.length;
}
