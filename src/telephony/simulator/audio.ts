// The simulated callee's voice and ears for a streamed call (docs/simulator.md, "Streaming to the
// agent runtime"): what it says (a tone pattern by default, or a WAV or raw μ-law file named by
// SIMULATOR_STREAM_AUDIO) as 20 ms μ-law frames, and a WAV file of what the runtime played to it.
// μ-law ↔ linear per sample is the `alawmulaw` package's, as in telephony/media/g711.ts.
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import alawmulaw from 'alawmulaw';
import { MULAW_SILENCE } from '../media/g711.js';
import { MEDIA_FORMAT } from '../media/media-streams.js';
import { FRAME_BYTES } from '../media/playout.js';

const { mulaw } = alawmulaw;

/** The Media Streams protocol's rate: 8,000 samples a second. */
const SAMPLE_RATE = MEDIA_FORMAT.sampleRate;

/**
 * The default voice: one second of a 440 Hz tone, then one second of silence, over and over. A
 * tone rather than speech so the default needs no speech synthesizer, and a pattern so a runtime's
 * voice activity detection sees turns.
 */
export const DEFAULT_TONE = { frequency: 440, toneMs: 1_000, silenceMs: 1_000 } as const;

/** What the simulated callee says: μ-law bytes and whether they repeat until the call ends (else silence follows). */
export interface CalleeVoice {
  mulaw: Uint8Array;
  loop: boolean;
}

export function defaultVoice(): CalleeVoice {
  const { frequency, toneMs, silenceMs } = DEFAULT_TONE;
  const toneSamples = (toneMs * SAMPLE_RATE) / 1000;
  const linear = new Int16Array(toneSamples + (silenceMs * SAMPLE_RATE) / 1000);
  // Half of full scale: loud enough for any voice activity detector, far from clipping.
  for (let n = 0; n < toneSamples; n++) linear[n] = Math.round(16_000 * Math.sin((2 * Math.PI * frequency * n) / SAMPLE_RATE));
  return { mulaw: mulaw.encode(linear), loop: true };
}

/**
 * SIMULATOR_STREAM_AUDIO's file: a WAV of 8 kHz mono, 16-bit PCM or μ-law, or (anything not a
 * RIFF file) raw 8 kHz μ-law. Played once, then silence. Refused with a sentence saying why, so
 * the service does not start with a voice it cannot play.
 */
export function voiceFromFile(path: string): CalleeVoice {
  const file = readFileSync(path);
  if (file.length < 12 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') return { mulaw: new Uint8Array(file), loop: false };
  let format: { code: number; channels: number; rate: number; bits: number } | undefined;
  for (let offset = 12; offset + 8 <= file.length; ) {
    const id = file.toString('ascii', offset, offset + 4);
    const size = file.readUInt32LE(offset + 4);
    const body = file.subarray(offset + 8, Math.min(file.length, offset + 8 + size));
    if (id === 'fmt ' && body.length >= 16) format = { code: body.readUInt16LE(0), channels: body.readUInt16LE(2), rate: body.readUInt32LE(4), bits: body.readUInt16LE(14) };
    if (id === 'data') {
      if (!format) throw new Error(`${path}: a WAV file whose data comes before its format`);
      if (format.channels !== 1 || format.rate !== SAMPLE_RATE) throw new Error(`${path}: ${format.channels} channel(s) at ${format.rate} Hz; the simulator plays 8000 Hz mono (sox in.wav -r 8000 -c 1 out.wav)`);
      if (format.code === 7 && format.bits === 8) return { mulaw: new Uint8Array(body), loop: false };
      if (format.code === 1 && format.bits === 16) {
        const pcm = new Int16Array(Math.floor(body.length / 2));
        for (let i = 0; i < pcm.length; i++) pcm[i] = body.readInt16LE(i * 2);
        return { mulaw: mulaw.encode(pcm), loop: false };
      }
      throw new Error(`${path}: WAV format ${format.code} with ${format.bits}-bit samples; the simulator plays 16-bit PCM or μ-law`);
    }
    offset += 8 + size + (size % 2);
  }
  throw new Error(`${path}: a WAV file without audio data`);
}

/** The `frameIndex`th 20 ms frame of `voice` (silence once a voice played once is over). */
export function voiceFrame(voice: CalleeVoice, frameIndex: number): Uint8Array {
  const frame = new Uint8Array(FRAME_BYTES).fill(MULAW_SILENCE);
  const length = voice.mulaw.length;
  if (length === 0) return frame;
  const start = frameIndex * FRAME_BYTES;
  if (!voice.loop && start >= length) return frame;
  for (let i = 0; i < FRAME_BYTES; i++) {
    const at = start + i;
    if (!voice.loop && at >= length) break;
    frame[i] = voice.mulaw[at % length] ?? MULAW_SILENCE;
  }
  return frame;
}

/**
 * A 16-bit PCM WAV written as the call goes (a call may last an hour: nothing is held in memory),
 * its sizes filled in when it is closed. Writes are synchronous and small (320 bytes a frame), so
 * frames land in order with no queue of their own.
 */
export class WavRecorder {
  private fd: number | undefined;
  private samples = 0;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
    writeSync(this.fd, wavHeader(0));
  }

  /** Samples written so far (8 kHz). */
  get length(): number {
    return this.samples;
  }

  /** μ-law audio, written as linear samples. */
  write(frame: Uint8Array): void {
    if (this.fd === undefined) return;
    const linear = mulaw.decode(frame);
    writeSync(this.fd, Buffer.from(linear.buffer, linear.byteOffset, linear.byteLength));
    this.samples += linear.length;
  }

  /** `samples` of silence. */
  silence(samples: number): void {
    if (this.fd === undefined || samples <= 0) return;
    writeSync(this.fd, Buffer.alloc(samples * 2));
    this.samples += samples;
  }

  close(): void {
    if (this.fd === undefined) return;
    writeSync(this.fd, wavHeader(this.samples), 0, 44, 0);
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** The 44-byte header of a mono 16-bit 8 kHz PCM WAV holding `samples` samples. */
function wavHeader(samples: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + samples * 2, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(SAMPLE_RATE, 24);
  header.writeUInt32LE(SAMPLE_RATE * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(samples * 2, 40);
  return header;
}
