// Who answered a call, from the first seconds of what the callee sends: a person says a short
// "Hello?" and waits; a machine talks on for several seconds (its greeting), often in many words,
// and ends with a beep or falls silent. The detector is fed the callee's audio in 20 ms frames and
// judges on frame counts alone (no clock, no timers: the same audio always gives the same verdict
// at the same frame), in the order classic dialers do (docs/telephony.md, "Machine detection from
// the call's audio"):
//
//   - a fax's tones (fax-tone.ts): its answer tone (CED, 2100 Hz) long enough, or its calling tone
//     (CNG, 1100 Hz) in its cadence before any word, is a fax; while one may be under way, nothing
//     else is decided (a CNG burst is not taken for a beep, nor its pause for a person's silence);
//   - a beep (a sustained pure tone, tone.ts) is a machine's, whatever came before it;
//   - no speech for `silenceTimeoutMs` from the answer: `unknown` (nobody there, or a silent line);
//   - a greeting (from its first word to its last, short pauses included) longer than
//     `speechThresholdMs`, or of `maxWords` words or more: a machine;
//   - a greeting followed by `speechEndThresholdMs` of silence before either: a person;
//   - nothing decided by `timeoutMs`: `unknown`.
//
// Verdicts use Twilio's words (its AnsweredBy), which `answered_by` already keeps as the raw
// verdict: `human`, `machine_start` (detect "on": said as soon as a machine is known), and with
// `message_end` the end of a machine's greeting, `machine_end_beep` once its beep has ended,
// `machine_end_silence` after `speechEndThresholdMs` of silence, `machine_end_other` when the
// timeout comes first; `fax`; `unknown`.
import alawmulaw from 'alawmulaw';
import type { AnsweredBy } from '../../../store/schema/schema.js';
import { FRAME_MS, SAMPLES_PER_FRAME } from '../playout.js';
import { FaxToneDetector } from './fax-tone.js';
import { BeepDetector } from './tone.js';
import { levelDbfs, VoiceActivity } from './voice-activity.js';

/** The tuning of detection (SIP_AMD_*, docs/configuration.md). */
export interface DetectorTuning {
  /** Nothing decided by then: `unknown` (or `machine_end_other` for a machine whose end never came). */
  timeoutMs: number;
  /** A greeting longer than this is a machine's. */
  speechThresholdMs: number;
  /** Silence after speech that ends a greeting. */
  speechEndThresholdMs: number;
  /** No speech at all for this long from the answer: `unknown`. */
  silenceTimeoutMs: number;
  /** A greeting of this many words or more is a machine's. */
  maxWords: number;
  /** The least length of a beep (a sustained pure tone between 400 and 2000 Hz). */
  beepMinMs: number;
  /** How far above the noise floor speech stands, in dB. */
  voiceMarginDb: number;
  /** The least length of a fax's answer tone (CED, 2100 Hz) for a fax: more than a beep's, less than CED's 2.6 s. */
  faxToneMinMs: number;
}

export const DEFAULT_TUNING: DetectorTuning = {
  timeoutMs: 30_000,
  speechThresholdMs: 2_400,
  speechEndThresholdMs: 1_200,
  silenceTimeoutMs: 5_000,
  maxWords: 6,
  beepMinMs: 120,
  voiceMarginDb: 12,
  faxToneMinMs: 1_500,
};

/** Speech is never quieter than this, whatever the floor (an idle line's hiss is around -70 dBFS). */
const VOICE_MINIMUM_DBFS = -50;
/** A word is at least this much voiced audio in a row (a click or a pop is not a word). */
const MIN_WORD_MS = 80;
/** Silence that separates two words. */
const WORD_GAP_MS = 100;
/** Where a voicemail beep may be, and how pure and steady it is. */
const BEEP = { minHz: 400, maxHz: 2_000, minPurity: 0.8, maxDriftHz: 15 } as const;

export type DetectMode = 'on' | 'message_end';

export type AudioVerdictRaw = 'human' | 'machine_start' | 'machine_end_beep' | 'machine_end_silence' | 'machine_end_other' | 'fax' | 'unknown';

export interface AudioVerdict {
  answeredBy: AnsweredBy;
  /** Twilio's word for it (AnsweredBy), kept as the run's raw verdict. */
  raw: AudioVerdictRaw;
  /** Milliseconds of audio heard when it was decided. */
  afterMs: number;
  /** Why, for people (a test's listing, a log line): "greeting of 3.1 s", "beep at 1000 Hz". */
  why: string;
}

const answeredByOf = (raw: AudioVerdictRaw): AnsweredBy => (raw === 'human' || raw === 'fax' || raw === 'unknown' ? raw : 'machine');

export class MachineDetector {
  private readonly vad: VoiceActivity;
  private readonly beep: BeepDetector;
  private readonly fax: FaxToneDetector;
  /** A beep heard while a fax tone might be under way: its verdict, said once the fax is ruled out. */
  private heldBeep: { raw: AudioVerdictRaw; why: string } | undefined;
  private frames = 0;
  private words = 0;
  private inWord = false;
  private voicedRun = 0;
  private silentRun = 0;
  private greetingStartMs: number | undefined;
  private lastVoiceEndMs = 0;
  /** A machine, known before the end of its greeting (detect "message_end" waits for that end). */
  private machine: string | undefined;
  private verdict: AudioVerdict | undefined;
  /** μ-law bytes not yet a whole frame. */
  private pending = new Uint8Array(0);

  constructor(
    private readonly tuning: DetectorTuning,
    private readonly mode: DetectMode,
  ) {
    this.vad = new VoiceActivity({ marginDb: tuning.voiceMarginDb, minimumDbfs: VOICE_MINIMUM_DBFS });
    this.beep = new BeepDetector({ ...BEEP, minFrames: Math.max(1, Math.round(tuning.beepMinMs / FRAME_MS)) });
    this.fax = new FaxToneDetector({ cedMinFrames: Math.max(1, Math.round(tuning.faxToneMinMs / FRAME_MS)) });
  }

  /** The verdict, once decided (then the detector takes no more audio). */
  get decided(): AudioVerdict | undefined {
    return this.verdict;
  }

  /** Milliseconds of audio heard. */
  get heardMs(): number {
    return this.frames * FRAME_MS;
  }

  /** μ-law audio of any length (RTP payloads): cut into 20 ms frames. The verdict when this audio decided it. */
  mulaw(chunk: Uint8Array): AudioVerdict | undefined {
    if (this.verdict) return undefined;
    let bytes = chunk;
    if (this.pending.length > 0) {
      bytes = new Uint8Array(this.pending.length + chunk.length);
      bytes.set(this.pending);
      bytes.set(chunk, this.pending.length);
    }
    let offset = 0;
    for (; offset + SAMPLES_PER_FRAME <= bytes.length; offset += SAMPLES_PER_FRAME) {
      const verdict = this.frame(alawmulaw.mulaw.decode(bytes.subarray(offset, offset + SAMPLES_PER_FRAME)));
      if (verdict) return verdict;
    }
    this.pending = bytes.slice(offset);
    return undefined;
  }

  /** One 20 ms frame of 8 kHz 16-bit linear PCM (160 samples). The verdict when this frame decided it. */
  frame(samples: Int16Array): AudioVerdict | undefined {
    if (this.verdict) return undefined;
    this.frames += 1;
    const now = this.heardMs;
    const level = levelDbfs(samples);
    const voiced = this.vad.voiced(level);
    // Tones are loud: a quiet frame is not searched for one (the filters are most of the work).
    const loud = level >= VOICE_MINIMUM_DBFS;
    const fax = this.fax.frame(samples, loud, voiced, this.greetingStartMs === undefined);
    if (fax.fax) return this.decide('fax', fax.fax);
    const beep = loud ? this.beep.frame(samples) : this.beep.quiet();
    if (beep === 'ended' || (beep === 'sounding' && this.mode === 'on')) {
      const said = { raw: this.mode === 'on' ? 'machine_start' : 'machine_end_beep', why: `beep at ${this.beep.toneHz} Hz` } as const;
      if (!this.fax.listening) return this.decide(said.raw, said.why);
      this.heldBeep ??= said;
    }
    // A fax's tone is not a word (nor is it silence that ends a greeting: nothing is decided while it may be a fax).
    this.follow(voiced && !fax.tone, now);
    if (this.fax.listening) return now >= this.tuning.timeoutMs ? this.timeUp() : undefined;
    if (this.heldBeep) return this.decide(this.heldBeep.raw, this.heldBeep.why);
    const greetingMs = this.greetingStartMs === undefined ? 0 : (this.inWord ? now : this.lastVoiceEndMs) - this.greetingStartMs;
    const silenceMs = this.inWord || beep === 'sounding' ? 0 : now - this.lastVoiceEndMs;
    if (!this.machine) {
      if (this.greetingStartMs === undefined && now >= this.tuning.silenceTimeoutMs) return this.decide('unknown', `no speech in ${seconds(now)}`);
      if (greetingMs >= this.tuning.speechThresholdMs) this.machine = `greeting longer than ${seconds(this.tuning.speechThresholdMs)}`;
      else if (this.words >= this.tuning.maxWords) this.machine = `${this.words} words`;
      else if (this.greetingStartMs !== undefined && silenceMs >= this.tuning.speechEndThresholdMs) {
        return this.decide('human', `greeting of ${seconds(greetingMs)} in ${this.words} word${this.words === 1 ? '' : 's'}, then silence`);
      }
      if (this.machine && this.mode === 'on') return this.decide('machine_start', this.machine);
    } else if (silenceMs >= this.tuning.speechEndThresholdMs) {
      return this.decide('machine_end_silence', `${this.machine}, then ${seconds(silenceMs)} of silence`);
    }
    if (now >= this.tuning.timeoutMs) return this.timeUp();
    return undefined;
  }

  /**
   * The time allowed is over (the timeout, or no audio arrives at all): the verdict as it stands,
   * `unknown`, or `machine_end_other` for a machine whose greeting never ended.
   */
  timeUp(): AudioVerdict {
    if (this.verdict) return this.verdict;
    if (this.heldBeep) return this.decide(this.heldBeep.raw, this.heldBeep.why);
    if (this.machine) return this.decide(this.mode === 'on' ? 'machine_start' : 'machine_end_other', `${this.machine}; its end not heard`);
    return this.decide('unknown', `nothing decided in ${seconds(this.heardMs)}`);
  }

  /** Words: a run of voiced frames long enough starts one, a long enough silence ends it. */
  private follow(voiced: boolean, now: number): void {
    if (voiced) {
      this.voicedRun += 1;
      this.silentRun = 0;
      if (!this.inWord && this.voicedRun * FRAME_MS >= MIN_WORD_MS) {
        this.inWord = true;
        this.words += 1;
        this.greetingStartMs ??= now - this.voicedRun * FRAME_MS;
      }
      return;
    }
    this.silentRun += 1;
    this.voicedRun = 0;
    if (this.inWord && this.silentRun * FRAME_MS >= WORD_GAP_MS) {
      this.inWord = false;
      this.lastVoiceEndMs = now - this.silentRun * FRAME_MS;
    }
  }

  private decide(raw: AudioVerdictRaw, why: string): AudioVerdict {
    this.verdict = { answeredBy: answeredByOf(raw), raw, afterMs: this.heardMs, why };
    return this.verdict;
  }
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
