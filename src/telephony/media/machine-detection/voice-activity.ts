// Energy-based voice activity over 20 ms frames of 8 kHz linear PCM, against an adaptive noise
// floor: a frame is voiced when its level stands far enough above the floor (and above an absolute
// minimum, so the faint hiss of an idle line is never speech). The floor follows the quietest
// frames: it falls at once to a quieter frame and rises slowly otherwise, so a steady background
// (line noise, a room) is learned within a frame or two and never counted as speech, while speech
// (always broken by pauses between syllables and words) keeps pulling it back down.

/** A frame's level in dB relative to full scale (a full-scale square wave is 0 dBFS). */
export function levelDbfs(samples: Int16Array): number {
  if (samples.length === 0) return FLOOR_DBFS;
  let sum = 0;
  for (const sample of samples) sum += sample * sample;
  const rms = Math.sqrt(sum / samples.length);
  return rms === 0 ? FLOOR_DBFS : Math.max(FLOOR_DBFS, 20 * Math.log10(rms / 32768));
}

/** The quietest level considered (digital silence): the floor never goes below it. */
const FLOOR_DBFS = -90;
/** The floor of a line heard only in digital silence so far: a quiet line's hiss. */
const IDLE_LINE_DBFS = -70;
/** How fast the floor rises while frames are louder than it, per 20 ms frame (5 dB a second). */
const FLOOR_RISE_DB = 0.1;
/** A quieter frame pulls the floor down this much of the way at once (one odd frame is not the floor). */
const FLOOR_FALL = 0.5;

export interface VoiceActivitySettings {
  /** How far above the noise floor a frame must be to be voiced, in dB. */
  marginDb: number;
  /** The least level a voiced frame has, whatever the floor, in dBFS. */
  minimumDbfs: number;
}

export class VoiceActivity {
  private floor: number | undefined;

  constructor(private readonly settings: VoiceActivitySettings) {}

  /** The current noise floor, in dBFS (undefined before the first frame). */
  get noiseFloor(): number | undefined {
    return this.floor;
  }

  /**
   * Whether this frame is voiced; the floor learns from it. Digital silence (an endpoint's silence
   * suppression, a gap filled with zeros) says nothing of the line's noise: it is unvoiced, and
   * leaves the floor where it was, or the noise after it would sound like speech until the floor
   * climbed back.
   */
  voiced(level: number): boolean {
    if (level <= FLOOR_DBFS) {
      // A line that starts in digital silence: its floor is taken for an idle line's.
      this.floor ??= IDLE_LINE_DBFS;
      return false;
    }
    const floor = this.floor ?? level;
    const voiced = level >= floor + this.settings.marginDb && level >= this.settings.minimumDbfs;
    this.floor = level < floor ? floor + (level - floor) * FLOOR_FALL : Math.min(level, floor + FLOOR_RISE_DB);
    if (this.floor < FLOOR_DBFS) this.floor = FLOOR_DBFS;
    return voiced;
  }
}
