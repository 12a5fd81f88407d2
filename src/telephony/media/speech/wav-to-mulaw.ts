// A speech command's WAV as a phone call's audio: mono, 8 kHz, μ-law. The WAV is read by the
// `wavefile` package (any PCM depth, float, μ-law, A-law and IMA ADPCM, and the header a command
// writing to a pipe leaves, whose sizes are unknown: espeak-ng's says 2 GB and the data ends at the
// file's end), channels are averaged, the rate is changed by `wave-resampler` (windowed sinc with a
// low-pass filter first, so what lies above 4 kHz does not fold back into the band), and `alawmulaw`
// encodes μ-law as the rest of the media does (g711.ts).
//
// Resampling is pure computation, about 30 ms of CPU for each second of speech (a minute-long
// message: two seconds): done on the event loop it would hold up every other call's paced audio.
// It runs in a worker thread, one per message, ended when it answers or at the time left.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import alawmulaw from 'alawmulaw';
import wavefile from 'wavefile';

/** The phone's rate: G.711's 8,000 samples a second. */
export const CALL_RATE = 8000;

/** What wavefile's `fmt` holds of a file (its type says only `object`). */
interface Format {
  audioFormat: number;
  numChannels: number;
  sampleRate: number;
}

/** WAVE format codes that wavefile decodes to PCM before its samples are read. */
const MULAW = 7;
const ALAW = 6;
const IMA_ADPCM = 17;

/** The samples of `wav` as 16-bit linear PCM, mono (channels averaged), with their rate. Throws on what is not a WAV file. */
export function decodeWav(wav: Uint8Array): { samples: Float64Array; rate: number } {
  const file = new wavefile.WaveFile(wav);
  const encoding = (file.fmt as Format).audioFormat;
  if (encoding === MULAW) file.fromMuLaw();
  else if (encoding === ALAW) file.fromALaw();
  else if (encoding === IMA_ADPCM) file.fromIMAADPCM();
  if (file.bitDepth !== '16') file.toBitDepth('16');
  // Read after the conversions: they replace the `fmt` object (and zero the old one).
  const format = file.fmt as Format;
  const channels = Math.max(1, format.numChannels);
  const read = file.getSamples(false, Float64Array) as unknown as Float64Array | Float64Array[];
  if (!format.sampleRate || format.sampleRate < 1000) throw new Error(`its sample rate (${format.sampleRate}) is not an audio rate`);
  if (channels === 1 || !Array.isArray(read)) return { samples: read as Float64Array, rate: format.sampleRate };
  const mono = new Float64Array(read[0]?.length ?? 0);
  for (const channel of read) for (let i = 0; i < mono.length; i += 1) mono[i] = (mono[i] ?? 0) + (channel[i] ?? 0) / channels;
  return { samples: mono, rate: format.sampleRate };
}

/** 16-bit linear samples (as numbers) to μ-law bytes, clipped to the 16-bit range. */
export function linearToMulaw(samples: ArrayLike<number>): Uint8Array {
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i += 1) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(samples[i] ?? 0)));
  return alawmulaw.mulaw.encode(pcm);
}

/** The worker's code: plain CommonJS, so it runs the same from dist/ and under tsx (as wal-checkpointer.ts's). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { resample } = require(workerData.resampler);
const out = Float64Array.from(resample(workerData.samples, workerData.from, workerData.to, { method: 'sinc', LPF: true }));
parentPort.postMessage(out, [out.buffer]);
`;

/** `samples` at `from` Hz, resampled to `to` Hz in a worker thread; rejects after `timeoutMs`. */
export function resampleOffThread(samples: Float64Array, from: number, to: number, timeoutMs: number): Promise<Float64Array> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      // Nothing of the parent's command line (tsx's loader in development): the code is plain JavaScript.
      execArgv: [],
      workerData: { samples, from, to, resampler: createRequire(import.meta.url).resolve('wave-resampler') },
      transferList: [samples.buffer as ArrayBuffer],
    });
    let settled = false;
    const settle = (then: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      then();
    };
    const timer = setTimeout(() => settle(() => reject(new TimeoutError(`resampling took longer than the ${timeoutMs} ms left`))), timeoutMs);
    worker.once('message', (out: Float64Array) => settle(() => resolve(out)));
    worker.once('error', (error) => settle(() => reject(error)));
    worker.once('exit', (code) => settle(() => reject(new Error(`the resampling worker exited with code ${code}`))));
  });
}

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/** A WAV file as 8 kHz μ-law, within `timeoutMs`. */
export async function wavToMulaw(wav: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
  const { samples, rate } = decodeWav(wav);
  if (samples.length === 0) throw new Error('it holds no audio');
  const atCallRate = rate === CALL_RATE ? samples : await resampleOffThread(samples, rate, CALL_RATE, timeoutMs);
  return linearToMulaw(atCallRate);
}
