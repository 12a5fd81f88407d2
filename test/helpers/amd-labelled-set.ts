// The labelled set machine detection is measured on (docs/telephony.md, "Machine detection from
// the call's audio"): clips synthesized at test time with Debian's espeak-ng (speech, several
// voices and speeds) and sox (resampling to the phone's 8 kHz and band, beeps, noise), then mixed
// here and sent through μ-law as a call's audio would be. People answering ("Hello?", "Yes, this is
// Anna", some after a short silence, some over noise), machines' greetings with and without a
// beep, fax machines (the answer tone CED at 2100 Hz, plain and with ANSam's phase reversals, and
// the calling tone CNG at 1100 Hz in its cadence, some after a silence, some over noise), silences
// and noise only, each labelled with the verdict it should get. Generated audio is
// cached in a temporary directory of this process, removed when it exits; nothing is committed.
//
// classifyLabelledSet() runs the detector over every clip and says how it did (the accuracy test,
// test/amd-audio-accuracy.test.ts, and the bench call it).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { SAMPLES_PER_FRAME } from '../../src/telephony/media/playout.js';
import { DEFAULT_TUNING, MachineDetector, type AudioVerdictRaw, type DetectMode, type DetectorTuning } from '../../src/telephony/media/machine-detection/machine-detector.js';
import { pcmWav } from './audio.js';

const RATE = 8000;

/** Why the set cannot be made here (espeak-ng or sox missing), or false. */
export function labelledSetSkip(): string | false {
  for (const [command, flag, pkg] of [['espeak-ng', '--version', 'espeak-ng'], ['sox', '--version', 'sox']] as const) {
    const probe = spawnSync(command, [flag], { encoding: 'utf8' });
    if (probe.error) {
      const reason = `${command} is not installed (${probe.error.message}); install the Debian package ${pkg}`;
      if (process.env.DIALTONE_TEST_REQUIRE_BARESIP === '1') throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_BARESIP=1 forbids skipping the media tests`);
      return reason;
    }
  }
  return false;
}

let cacheDir: string | undefined;

function cache(): string {
  if (!cacheDir) {
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-amd-set-'));
    cacheDir = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return cacheDir;
}

/** Raw 16-bit 8 kHz mono made by a command (cached by its arguments). */
function rawOf(key: string[], make: (out: string) => void): Int16Array {
  const path = join(cache(), `${createHash('sha256').update(key.join('\0')).digest('hex').slice(0, 24)}.raw`);
  if (!existsSync(path)) make(path);
  const bytes = readFileSync(path);
  const copy = Buffer.from(bytes.subarray(0, bytes.length - (bytes.length % 2)));
  return new Int16Array(copy.buffer, copy.byteOffset, copy.length / 2);
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error || result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.error?.message ?? result.stderr}`);
}

/** The phone's audio: 8 kHz, the 300-3400 Hz band. */
const PHONE = ['-t', 'raw', '-r', String(RATE), '-e', 'signed', '-b', '16', '-c', '1'];

export interface Speech {
  text: string;
  voice: string;
  /** Words a minute (espeak-ng's -s; 175 is its default). */
  speed?: number;
  /** 0-99 (espeak-ng's -p; 50 is its default). */
  pitch?: number;
  /** Peak level, dBFS (default -3). */
  peakDb?: number;
}

/** Speech synthesized by espeak-ng, at the phone's rate and band, its peak at `peakDb`. */
export function speech(spoken: Speech): Int16Array {
  const args = ['-v', spoken.voice, '-s', String(spoken.speed ?? 175), '-p', String(spoken.pitch ?? 50)];
  return rawOf(['speech', ...args, spoken.text, String(spoken.peakDb ?? -3)], (out) => {
    const wav = `${out}.wav`;
    run('espeak-ng', [...args, '-w', wav, spoken.text]);
    // espeak-ng leads and trails with some silence of its own: trimmed, so the clip says where silence is.
    run('sox', [wav, ...PHONE, out, 'silence', '1', '0.02', '0.5%', 'reverse', 'silence', '1', '0.02', '0.5%', 'reverse', 'sinc', '300-3400', 'norm', String(spoken.peakDb ?? -3)]);
    rmSync(wav);
  });
}

/** A sine made by sox: a voicemail's beep, a fax's tone; `phase` in % of a cycle (50: reversed). */
export function tone(hz: number, ms: number, volume = 0.5, phase = 0): Int16Array {
  return rawOf(['tone', String(hz), String(ms), String(volume), String(phase)], (out) =>
    run('sox', ['-n', ...PHONE, out, 'synth', String(ms / 1000), 'sine', String(hz), '0', String(phase), 'vol', String(volume)]),
  );
}

/** A fax's answer tone (CED, 2100 Hz), `ms` long; with `reversals`, ANSam's: its phase reversed every 450 ms (V.8). */
function answerTone(ms: number, volume: number, reversals: boolean, hz = 2_100): Int16Array[] {
  if (!reversals) return [tone(hz, ms, volume)];
  // 450 ms of 2100 Hz is 945 whole cycles: each segment starts where a cycle does, so a phase of 50 % is a reversal.
  return Array.from({ length: Math.ceil(ms / 450) }, (_, i) => tone(hz, Math.min(450, ms - i * 450), volume, i % 2 === 0 ? 0 : 50));
}

/** A fax calling (CNG): `bursts` of 1100 Hz, 0.5 s on and 3 s off (T.30). */
const callingTone = (bursts: number, volume: number): Int16Array[] => Array.from({ length: bursts }, () => [tone(1_100, 500, volume), silence(3_000)]).flat();

export type NoiseKind = 'whitenoise' | 'pinknoise' | 'brownnoise';

/** Noise made by sox (repeatable), band-limited to the phone's, its RMS at `rmsDb` dBFS. */
export function noise(kind: NoiseKind, ms: number, rmsDb: number): Int16Array {
  const raw = rawOf(['noise', kind, String(ms)], (out) => run('sox', ['-R', '-n', ...PHONE, out, 'synth', String(ms / 1000), kind, 'sinc', '300-3400', 'norm', '-6']));
  let sum = 0;
  for (const sample of raw) sum += sample * sample;
  const rms = Math.sqrt(sum / Math.max(1, raw.length));
  const gain = rms === 0 ? 0 : (32768 * 10 ** (rmsDb / 20)) / rms;
  return Int16Array.from(raw, (sample) => clamp(sample * gain));
}

const clamp = (value: number) => Math.max(-32768, Math.min(32767, Math.round(value)));

const silence = (ms: number) => new Int16Array((ms * RATE) / 1000);

function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** `background` under `foreground`, sample by sample (the background repeated or cut to fit). */
function mix(foreground: Int16Array, background: Int16Array | undefined): Int16Array {
  if (!background || background.length === 0) return foreground;
  return Int16Array.from(foreground, (sample, i) => clamp(sample + (background[i % background.length] ?? 0)));
}

export interface LabelledClip {
  name: string;
  /** What it is, for the listing. */
  kind: 'person' | 'machine' | 'fax' | 'silence' | 'noise';
  /** The verdict it should get with detect "message_end" (with "on", every machine_* is machine_start). */
  expected: AudioVerdictRaw;
  /** The call's audio as it arrives: μ-law at 8 kHz. */
  mulaw: Uint8Array;
}

interface ClipSpec {
  name: string;
  kind: LabelledClip['kind'];
  expected: AudioVerdictRaw;
  parts: () => Int16Array[];
  background?: () => Int16Array;
}

/** Every clip at least this long, its end padded with silence (under its background, if any). */
const CLIP_MS = 12_000;

const PEOPLE: Array<{ text: string; voice: string; speed?: number; pitch?: number; leadMs?: number; noise?: [NoiseKind, number]; peakDb?: number; againAfterMs?: number }> = [
  { text: 'Hello?', voice: 'en-us' },
  { text: 'Hello?', voice: 'en-gb', speed: 140 },
  { text: 'Hello?', voice: 'en-us+f3', speed: 200, leadMs: 800 },
  { text: 'Hello?', voice: 'en-gb-scotland', leadMs: 1_500, noise: ['pinknoise', -45] },
  { text: 'Yes, this is Anna.', voice: 'en-us+f2' },
  { text: 'Yes, this is Anna.', voice: 'en-gb-x-rp', speed: 150, noise: ['whitenoise', -50] },
  { text: 'Yes, this is Anna.', voice: 'en-029', speed: 190, leadMs: 600 },
  { text: 'Hello, who is this?', voice: 'en-us' },
  { text: 'Hello, who is this?', voice: 'en-gb+f4', speed: 160, noise: ['brownnoise', -42] },
  { text: 'Hello, who is this?', voice: 'en-us+m3', speed: 200, leadMs: 1_000 },
  { text: 'Hi.', voice: 'en-us+f3' },
  { text: 'Yeah?', voice: 'en-gb', leadMs: 400, peakDb: -12 },
  { text: 'Speaking.', voice: 'en-us+m7', noise: ['pinknoise', -40] },
  { text: 'Hello, Anna speaking.', voice: 'en-gb-scotland+f2', speed: 180 },
  { text: 'Good morning?', voice: 'en-us', pitch: 70, leadMs: 700 },
  { text: 'Hello?', voice: 'en-us+f4', peakDb: -15, noise: ['whitenoise', -55] },
  // Nobody answers the first "Hello?": the person says it again.
  { text: 'Hello?', voice: 'en-gb+m3', againAfterMs: 900 },
  { text: 'Yes?', voice: 'en-us+f2', leadMs: 500, againAfterMs: 700, noise: ['pinknoise', -48] },
];

const GREETINGS = [
  "Hi, you've reached Anna. I can't take your call right now. Please leave a message after the tone.",
  'Hello, this is the voicemail of John Smith. Leave your name and number and I will call you back.',
  "You have reached the office of Doctor Lee. We are closed. Please leave a message after the beep.",
  'The person you are calling is not available. Please record your message after the tone. When you have finished, hang up.',
  "Hey, it's Mike. Leave a message.",
  'Thank you for calling Acme. Our office hours are nine to five, Monday to Friday. Please leave a message.',
];

const MACHINES: Array<{ greeting: number; voice: string; speed?: number; beep?: [number, number]; leadMs?: number; noise?: [NoiseKind, number]; peakDb?: number }> = [
  { greeting: 0, voice: 'en-us', beep: [1_000, 500] },
  { greeting: 0, voice: 'en-gb+f3', speed: 160 },
  { greeting: 1, voice: 'en-us+m3', beep: [850, 400], noise: ['pinknoise', -45] },
  { greeting: 1, voice: 'en-gb-x-rp', speed: 190 },
  { greeting: 2, voice: 'en-us+f2', beep: [1_400, 300] },
  { greeting: 2, voice: 'en-029', noise: ['whitenoise', -50] },
  { greeting: 3, voice: 'en-us', speed: 150, beep: [440, 800] },
  { greeting: 3, voice: 'en-gb-scotland', leadMs: 500 },
  { greeting: 4, voice: 'en-us+m7', beep: [1_000, 250] },
  { greeting: 4, voice: 'en-gb+f4', speed: 200 },
  { greeting: 5, voice: 'en-us+f3', beep: [1_800, 600], noise: ['brownnoise', -42] },
  { greeting: 5, voice: 'en-gb', speed: 170, leadMs: 300 },
  { greeting: 0, voice: 'en-us+m3', speed: 210, beep: [2_000, 400], peakDb: -14 },
  { greeting: 1, voice: 'en-us+f4', beep: [600, 500], noise: ['pinknoise', -40] },
  { greeting: 2, voice: 'en-gb-x-rp', beep: [1_000, 500], leadMs: 1_200 },
  { greeting: 3, voice: 'en-029+f2', speed: 180, noise: ['whitenoise', -48] },
  { greeting: 4, voice: 'en-gb-scotland+m3', speed: 160, beep: [1_100, 400] },
  { greeting: 5, voice: 'en-us', speed: 190, beep: [900, 700], peakDb: -10 },
];

const FAXES: Array<{ name: string; tone: 'CED' | 'ANSam' | 'CNG'; leadMs?: number; volume?: number; hz?: number; noise?: [NoiseKind, number] }> = [
  { name: 'CED 2100 Hz', tone: 'CED' },
  { name: 'CED 2100 Hz with phase reversals (ANSam)', tone: 'ANSam', noise: ['pinknoise', -45] },
  { name: 'CED 2100 Hz', tone: 'CED', leadMs: 1_800, noise: ['whitenoise', -50] },
  { name: 'CED 2090 Hz, quiet', tone: 'CED', hz: 2_090, volume: 0.15, noise: ['brownnoise', -42] },
  { name: 'CED 2100 Hz with phase reversals (ANSam)', tone: 'ANSam', leadMs: 2_200, noise: ['pinknoise', -40] },
  { name: 'CNG 1100 Hz, 0.5 s on and 3 s off', tone: 'CNG', leadMs: 500 },
  { name: 'CNG 1100 Hz, 0.5 s on and 3 s off', tone: 'CNG', leadMs: 1_000, volume: 0.25, noise: ['whitenoise', -48] },
];

const QUIET: Array<{ name: string; kind: 'silence' | 'noise'; background?: [NoiseKind, number] }> = [
  { name: 'digital silence', kind: 'silence' },
  { name: 'idle line hiss (-70 dBFS)', kind: 'silence', background: ['whitenoise', -70] },
  { name: 'faint hum of a room (-62 dBFS brown)', kind: 'silence', background: ['brownnoise', -62] },
  { name: 'white noise at -40 dBFS', kind: 'noise', background: ['whitenoise', -40] },
  { name: 'white noise at -25 dBFS', kind: 'noise', background: ['whitenoise', -25] },
  { name: 'pink noise at -35 dBFS', kind: 'noise', background: ['pinknoise', -35] },
  { name: 'pink noise at -20 dBFS', kind: 'noise', background: ['pinknoise', -20] },
  { name: 'brown noise at -30 dBFS', kind: 'noise', background: ['brownnoise', -30] },
];

function specs(): ClipSpec[] {
  const list: ClipSpec[] = [];
  for (const person of PEOPLE) {
    const said = { text: person.text, voice: person.voice, ...(person.speed ? { speed: person.speed } : {}), ...(person.pitch ? { pitch: person.pitch } : {}), ...(person.peakDb ? { peakDb: person.peakDb } : {}) };
    list.push({
      name: `person "${person.text}"${person.againAfterMs ? ` twice, ${person.againAfterMs} ms apart` : ''} (${person.voice}, ${person.speed ?? 175} wpm${person.leadMs ? `, after ${person.leadMs} ms` : ''}${person.noise ? `, ${person.noise[0]} ${person.noise[1]} dBFS` : ''})`,
      kind: 'person',
      expected: 'human',
      parts: () => [silence(person.leadMs ?? 200), speech(said), ...(person.againAfterMs ? [silence(person.againAfterMs), speech(said)] : [])],
      ...(person.noise ? { background: () => noise(person.noise![0], 5_000, person.noise![1]) } : {}),
    });
  }
  for (const machine of MACHINES) {
    const text = GREETINGS[machine.greeting] ?? '';
    list.push({
      name: `machine greeting ${machine.greeting + 1} (${machine.voice}, ${machine.speed ?? 175} wpm${machine.beep ? `, beep ${machine.beep[0]} Hz ${machine.beep[1]} ms` : ', no beep'}${machine.leadMs ? `, after ${machine.leadMs} ms` : ''}${machine.noise ? `, ${machine.noise[0]} ${machine.noise[1]} dBFS` : ''})`,
      kind: 'machine',
      expected: machine.beep ? 'machine_end_beep' : 'machine_end_silence',
      parts: () => [
        silence(machine.leadMs ?? 200),
        speech({ text, voice: machine.voice, ...(machine.speed ? { speed: machine.speed } : {}), ...(machine.peakDb ? { peakDb: machine.peakDb } : {}) }),
        ...(machine.beep ? [silence(400), tone(machine.beep[0], machine.beep[1])] : []),
      ],
      ...(machine.noise ? { background: () => noise(machine.noise![0], 5_000, machine.noise![1]) } : {}),
    });
  }
  for (const fax of FAXES) {
    const volume = fax.volume ?? 0.5;
    list.push({
      name: `fax ${fax.name}${fax.leadMs ? ` after ${fax.leadMs} ms` : ''}${fax.noise ? `, ${fax.noise[0]} ${fax.noise[1]} dBFS` : ''}`,
      kind: 'fax',
      expected: 'fax',
      parts: () => [silence(fax.leadMs ?? 200), ...(fax.tone === 'CNG' ? callingTone(3, volume) : answerTone(3_300, volume, fax.tone === 'ANSam', fax.hz))],
      ...(fax.noise ? { background: () => noise(fax.noise![0], 5_000, fax.noise![1]) } : {}),
    });
  }
  for (const quiet of QUIET) {
    list.push({
      name: quiet.name,
      kind: quiet.kind,
      expected: 'unknown',
      parts: () => [],
      ...(quiet.background ? { background: () => noise(quiet.background![0], 5_000, quiet.background![1]) } : {}),
    });
  }
  return list;
}

let made: LabelledClip[] | undefined;

/** The labelled set (made on first use in this process, then kept). */
export function labelledSet(): LabelledClip[] {
  made ??= specs().map((spec) => {
    const parts = spec.parts();
    const body = concat(parts);
    const padded = body.length >= (CLIP_MS * RATE) / 1000 ? body : concat([body, silence(CLIP_MS - Math.floor((body.length * 1000) / RATE))]);
    const linear = mix(padded, spec.background?.());
    return { name: spec.name, kind: spec.kind, expected: spec.expected, mulaw: alawmulaw.mulaw.encode(linear) };
  });
  return made;
}

/** What the detector said of one clip with detect "message_end". */
export interface ClipResult {
  name: string;
  kind: LabelledClip['kind'];
  expected: AudioVerdictRaw;
  got: AudioVerdictRaw;
  afterMs: number;
  why: string;
  correct: boolean;
}

export interface LabelledSetReport {
  total: number;
  correct: number;
  /** correct / total, 0 to 1. */
  accuracy: number;
  /** Whether `answered_by` (human, machine, fax, unknown) was right, however the machine's end was told. */
  answeredByCorrect: number;
  misclassified: ClipResult[];
  /** Per kind of clip (person, machine, fax, silence, noise): how many, and how many right. */
  byKind: Record<LabelledClip['kind'], { total: number; correct: number }>;
  results: ClipResult[];
}

const answeredBy = (raw: AudioVerdictRaw) => (raw.startsWith('machine') ? 'machine' : raw);

/** Feeds `clip` to a detector in 20 ms frames, as RTP would, until it decides (or the clip ends: the time is up). */
export function classifyClip(clip: LabelledClip, tuning: DetectorTuning = DEFAULT_TUNING, mode: DetectMode = 'message_end') {
  const detector = new MachineDetector(tuning, mode);
  for (let offset = 0; offset < clip.mulaw.length && !detector.decided; offset += SAMPLES_PER_FRAME) detector.mulaw(clip.mulaw.subarray(offset, offset + SAMPLES_PER_FRAME));
  return detector.decided ?? detector.timeUp();
}

/**
 * Runs the detector (detect "message_end", the given tuning, by default SIP_AMD_*'s defaults) over
 * every clip of the labelled set: a clip is right when the raw verdict is the one expected (the
 * machine's end told right too), and `answeredByCorrect` counts those whose answered_by is right.
 */
export function classifyLabelledSet(tuning: DetectorTuning = DEFAULT_TUNING): LabelledSetReport {
  const results = labelledSet().map((clip): ClipResult => {
    const verdict = classifyClip(clip, tuning);
    return { name: clip.name, kind: clip.kind, expected: clip.expected, got: verdict.raw, afterMs: verdict.afterMs, why: verdict.why, correct: verdict.raw === clip.expected };
  });
  const correct = results.filter((r) => r.correct).length;
  const byKind: LabelledSetReport['byKind'] = { person: { total: 0, correct: 0 }, machine: { total: 0, correct: 0 }, fax: { total: 0, correct: 0 }, silence: { total: 0, correct: 0 }, noise: { total: 0, correct: 0 } };
  for (const result of results) {
    byKind[result.kind].total += 1;
    if (result.correct) byKind[result.kind].correct += 1;
  }
  return {
    total: results.length,
    correct,
    accuracy: results.length === 0 ? 0 : correct / results.length,
    answeredByCorrect: results.filter((r) => answeredBy(r.got) === answeredBy(r.expected)).length,
    misclassified: results.filter((r) => !r.correct),
    byKind,
    results,
  };
}

/** The report as lines for people: the figures, then every misclassification. */
export function describeReport(report: LabelledSetReport): string[] {
  return [
    `machine detection on the labelled set: ${report.correct}/${report.total} right (${(report.accuracy * 100).toFixed(1)} %); answered_by right on ${report.answeredByCorrect}/${report.total}`,
    `  by kind: ${Object.entries(report.byKind).map(([kind, figures]) => `${kind} ${figures.correct}/${figures.total}`).join(', ')}`,
    ...report.misclassified.map((r) => `  misclassified: ${r.name}: expected ${r.expected}, got ${r.got} after ${(r.afterMs / 1000).toFixed(1)} s (${r.why})`),
  ];
}

/** Writes a clip as a 16-bit 8 kHz WAV (baresip plays these). */
export function writeClipWav(path: string, clip: LabelledClip): void {
  writeFileSync(path, pcmWav(alawmulaw.mulaw.decode(clip.mulaw), RATE));
}
