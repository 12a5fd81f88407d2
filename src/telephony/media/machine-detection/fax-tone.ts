// A fax machine's tones in 20 ms frames, as classic dialers listen for them (docs/telephony.md,
// "Machine detection from the call's audio"):
//
//   - CED, the called fax's answer tone (ITU-T T.30, V.25): 2100 Hz (±15 Hz) for 2.6 to 4 s, in
//     its ANSam variant (V.8) with a phase reversal every 450 ms. A fax when it has lasted
//     `cedMinFrames`: longer than any voicemail beep (0.2 to 1 s), shorter than CED itself.
//   - CNG, the calling tone a fax sends while it waits (T.30): 1100 Hz (±38 Hz), 0.5 s on, 3 s off
//     (±15 %). One burst alone is what a voicemail's beep at 1100 Hz could be too, so a fax is the
//     cadence: a burst of CNG's length, the silence of its pause, then the next burst.
//
// Each frame is searched for its strongest frequency near each tone with Goertzel filters
// (tone.ts's dominantTone: the narrowband energy against the frame's whole energy), and counts as
// the tone when that share is high and the frequency within the tone's tolerance. A phase reversal
// cancels the tone within the frame it falls in, so a CED run bears a frame or two of gap.
// Written here rather than taken from npm: no package there detects fax tones, and its Goertzel
// packages are unmaintained single filters (tone.ts says more).
import { dominantTone, goertzelPower, type ToneBand } from './tone.js';

export interface FaxToneSettings {
  /** Frames of 2100 Hz (CED, ANSam) that make a fax. */
  cedMinFrames: number;
}

interface FaxTone extends ToneBand {
  hz: number;
  toleranceHz: number;
}

// The bands searched reach a filter's width (50 Hz at 160 samples) past the tolerance, so a tone at
// its tolerance's edge is still found at its own frequency.
const CED: FaxTone = { hz: 2_100, toleranceHz: 40, minHz: 2_050, maxHz: 2_150 };
const CNG: FaxTone = { hz: 1_100, toleranceHz: 40, minHz: 1_050, maxHz: 1_150 };
/** The least share of a frame's energy at the tone (a pure sine is about 1, speech well under). */
const MIN_PURITY = 0.8;
/**
 * The share a frame holds at the best of three filters across a tone's band (its ends and its
 * middle, 50 Hz apart) for it to be searched finely: a tone anywhere in the band leaves at least
 * 0.4 at the nearest of them (25 Hz off), so a frame under this holds none, and most frames (speech,
 * noise) are ruled out by three filters instead of fourteen.
 */
const MIN_COARSE_PURITY = 0.3;
/** Frames without the tone a CED run bears (a phase reversal's frame, and the one it may straddle). */
const CED_GAP_FRAMES = 2;
/** A CNG burst, in frames: 0.5 s ±15 %, with a frame either side for bursts cut across frames. */
const CNG_BURST_FRAMES = { min: 20, max: 30 } as const;
/** CNG's pause between bursts, in frames: 3 s ±15 %, with a frame either side. */
const CNG_PAUSE_FRAMES = { min: 126, max: 174 } as const;

export interface FaxFrame {
  /** The frame is one of a fax tone's (CED, or CNG while CNG is listened for): a tone, not speech. */
  tone: boolean;
  /** A fax, said once: why ("CED at 2100 Hz for 1.5 s", "CNG cadence at 1100 Hz"). */
  fax?: string;
}

type CngState = { phase: 'idle' } | { phase: 'burst'; frames: number; bursts: number } | { phase: 'too long' } | { phase: 'pause'; frames: number };

export class FaxToneDetector {
  private cedFrames = 0;
  private cedGap = 0;
  private cedHz = 0;
  private cng: CngState = { phase: 'idle' };

  constructor(private readonly settings: FaxToneSettings) {}

  /**
   * Whether a fax tone may be under way: a CED run begun, a CNG burst sounding, or the pause after
   * one (the next burst may come). The detector holds its other verdicts meanwhile: a CNG burst is
   * not a beep until its cadence has been ruled out.
   */
  get listening(): boolean {
    return this.cedFrames > 0 || this.cng.phase === 'burst' || this.cng.phase === 'pause';
  }

  /**
   * One 20 ms frame. `loud`: the frame is loud enough to hold a tone (the filters are skipped
   * otherwise); `speech`: the voice activity heard it; `cng`: CNG is still listened for (a fax
   * says nothing, so once words are heard, an 1100 Hz tone is a voicemail's beep).
   */
  frame(samples: Int16Array, loud: boolean, speech: boolean, cng: boolean): FaxFrame {
    const ced = loud && this.toneOf(samples, CED);
    if (ced) {
      this.cedFrames += 1 + this.cedGap;
      this.cedGap = 0;
      if (this.cedFrames >= this.settings.cedMinFrames) return { tone: true, fax: `CED at ${Math.round(this.cedHz)} Hz for ${seconds(this.cedFrames)}` };
    } else if (this.cedFrames > 0 && ++this.cedGap > CED_GAP_FRAMES) {
      this.cedFrames = 0;
      this.cedGap = 0;
    }
    if (!cng) {
      this.cng = { phase: 'idle' };
      return { tone: ced };
    }
    const calling = loud && !ced && this.toneOf(samples, CNG);
    const fax = this.followCng(calling, speech);
    return { tone: ced || calling, ...(fax ? { fax } : {}) };
  }

  private toneOf(samples: Int16Array, tone: FaxTone): boolean {
    let energy = 0;
    for (const sample of samples) energy += sample * sample;
    if (energy === 0) return false;
    const coarse = Math.max(goertzelPower(samples, tone.minHz), goertzelPower(samples, tone.hz), goertzelPower(samples, tone.maxHz));
    if ((2 * coarse) / (samples.length * energy) < MIN_COARSE_PURITY) return false;
    const found = dominantTone(samples, tone);
    const heard = found.purity >= MIN_PURITY && Math.abs(found.frequency - tone.hz) <= tone.toleranceHz;
    if (heard && tone === CED) this.cedHz = found.frequency;
    return heard;
  }

  /** CNG's cadence: a burst, its pause, the next burst (a fax once that one has CNG's length). */
  private followCng(calling: boolean, speech: boolean): string | undefined {
    const state = this.cng;
    if (calling) {
      if (state.phase === 'burst') {
        state.frames += 1;
        if (state.frames > CNG_BURST_FRAMES.max) this.cng = { phase: 'too long' };
        else if (state.bursts >= 1 && state.frames >= CNG_BURST_FRAMES.min) return `CNG at ${CNG.hz} Hz, ${state.bursts + 1} bursts in its cadence`;
      } else if (state.phase === 'pause') {
        // The next burst, when the pause had CNG's length; otherwise a new first burst.
        const inCadence = state.frames >= CNG_PAUSE_FRAMES.min;
        this.cng = { phase: 'burst', frames: 1, bursts: inCadence ? 1 : 0 };
      } else if (state.phase === 'idle') {
        this.cng = { phase: 'burst', frames: 1, bursts: 0 };
      }
      return undefined;
    }
    if (state.phase === 'burst') {
      this.cng = state.frames >= CNG_BURST_FRAMES.min ? { phase: 'pause', frames: 1 } : { phase: 'idle' };
    } else if (state.phase === 'pause') {
      // Words in the pause, or a pause longer than CNG's: not a fax calling.
      state.frames += 1;
      if (speech || state.frames > CNG_PAUSE_FRAMES.max) this.cng = { phase: 'idle' };
    } else if (state.phase === 'too long') {
      this.cng = { phase: 'idle' };
    }
    return undefined;
  }
}

const seconds = (frames: number) => `${((frames * 20) / 1000).toFixed(1)} s`;
