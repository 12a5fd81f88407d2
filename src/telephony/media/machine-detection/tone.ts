// A sustained single tone in 20 ms frames: the beep that ends a voicemail greeting, found with a
// bank of Goertzel filters as classic dialers do. Each frame is searched for its strongest
// frequency between the band's ends, coarse (one filter per 50 Hz, the resolution of 160 samples)
// then fine (5 Hz steps around the best), and its purity measured: the share of the frame's energy
// at that one frequency (1 for a pure sine, well under for speech, whose energy spreads over many
// harmonics and formants, or for noise). A beep is a run of pure frames at one steady frequency.
// Written here rather than taken from npm: the Goertzel packages there are unmaintained single
// filters (goertzel, goertzel-stream) with a fixed frequency, where a beep's frequency is unknown.

/** Goertzel's power at `frequency` over `samples` (8 kHz): |X(f)|², the DFT term at that frequency. */
export function goertzelPower(samples: Int16Array, frequency: number, rate = 8000): number {
  const coefficient = 2 * Math.cos((2 * Math.PI * frequency) / rate);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < samples.length; i++) {
    const s0 = (samples[i] ?? 0) + coefficient * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coefficient * s1 * s2;
}

export interface ToneBand {
  minHz: number;
  maxHz: number;
}

/** The strongest frequency of a frame within the band, and the share of the frame's energy it holds (0 to about 1). */
export function dominantTone(samples: Int16Array, band: ToneBand, rate = 8000): { frequency: number; purity: number } {
  let energy = 0;
  for (const sample of samples) energy += sample * sample;
  if (energy === 0 || samples.length === 0) return { frequency: 0, purity: 0 };
  // A pure sine A·cos(ωn) over N samples: |X|² = (A·N/2)², energy A²·N/2; so purity = 2|X|²/(N·energy).
  const purityOf = (power: number) => (2 * power) / (samples.length * energy);
  const coarse = rate / samples.length;
  let best = { frequency: band.minHz, power: -1 };
  for (let frequency = band.minHz; frequency <= band.maxHz; frequency += coarse) {
    const power = goertzelPower(samples, frequency, rate);
    if (power > best.power) best = { frequency, power };
  }
  const fine = { ...best };
  for (let frequency = best.frequency - coarse / 2; frequency <= best.frequency + coarse / 2; frequency += FINE_STEP_HZ) {
    const power = goertzelPower(samples, frequency, rate);
    if (power > fine.power) {
      fine.frequency = frequency;
      fine.power = power;
    }
  }
  return { frequency: fine.frequency, purity: purityOf(fine.power) };
}

const FINE_STEP_HZ = 5;

export interface ToneSettings extends ToneBand {
  /** The least share of a frame's energy at its dominant frequency for the frame to be tonal. */
  minPurity: number;
  /** How far the frequency may wander between frames of one tone, in Hz. */
  maxDriftHz: number;
  /** Frames a tone lasts at least to count as a beep. */
  minFrames: number;
}

/**
 * Follows frames and says when a beep has ended: `frame` answers `ended` on the first frame after a
 * run of at least `minFrames` tonal frames at one frequency (the message may be spoken then, never
 * over the beep), and `sounding` while such a run is still going.
 */
export class BeepDetector {
  private run = 0;
  private frequency = 0;
  /** The frequency of the last tone long enough to be a beep. */
  private beepHz = 0;

  constructor(private readonly settings: ToneSettings) {}

  frame(samples: Int16Array): 'ended' | 'sounding' | undefined {
    const tone = dominantTone(samples, this.settings);
    const tonal = tone.purity >= this.settings.minPurity;
    if (tonal && this.run > 0 && Math.abs(tone.frequency - this.frequency) <= this.settings.maxDriftHz) {
      this.run += 1;
      if (this.run < this.settings.minFrames) return undefined;
      this.beepHz = this.frequency;
      return 'sounding';
    }
    const was = this.run;
    this.run = tonal ? 1 : 0;
    this.frequency = tone.frequency;
    return was >= this.settings.minFrames ? 'ended' : undefined;
  }

  /** The frequency of the last beep (Hz). */
  get toneHz(): number {
    return Math.round(this.beepHz);
  }

  /** A frame too quiet to be a beep (not worth the filters): it ends any tone. */
  quiet(): 'ended' | undefined {
    const was = this.run;
    this.run = 0;
    return was >= this.settings.minFrames ? 'ended' : undefined;
  }
}
