// Machine detection on one call: the detector (machine-detector.ts) fed the callee's audio as it
// arrives over RTP, whatever the provider. RTP timestamps say where each packet belongs: a packet
// later than the one expected means audio never sent (an endpoint suppressing silence) or lost, and
// the detector hears that much silence, so a person's silence after "Hello?" counts even when
// their phone sends nothing; a packet from the past (reordered, repeated) is not heard again. The
// verdict is said once, through `decided`; `timeUp` gives the verdict when the time allowed is over
// (the caller's timer: no audio may come at all).
import { MULAW_SILENCE } from '../g711.js';
import { SAMPLES_PER_FRAME } from '../playout.js';
import { MachineDetector, type AudioVerdict, type DetectMode, type DetectorTuning } from './machine-detector.js';

/** Longest gap filled with silence (10 s of samples); a larger jump is a new timestamp base, not a gap. */
const MAX_GAP_SAMPLES = 80_000;
const SILENT_FRAME = new Uint8Array(SAMPLES_PER_FRAME).fill(MULAW_SILENCE);

export class CallMachineListener {
  private readonly detector: MachineDetector;
  private expected: number | undefined;
  private done = false;

  constructor(
    tuning: DetectorTuning,
    mode: DetectMode,
    private readonly decided: (verdict: AudioVerdict) => void,
  ) {
    this.detector = new MachineDetector(tuning, mode);
  }

  /** μ-law audio from the callee and its RTP timestamp (8 kHz units). */
  audio(mulaw: Uint8Array, timestamp: number): void {
    if (this.done) return;
    if (this.expected !== undefined) {
      const ahead = (timestamp - this.expected + 2 ** 32) % 2 ** 32;
      if (ahead >= 2 ** 31) return; // from the past: already heard, or too late to matter
      if (ahead > 0 && ahead <= MAX_GAP_SAMPLES) {
        for (let filled = 0; filled + SAMPLES_PER_FRAME <= ahead && !this.done; filled += SAMPLES_PER_FRAME) this.hear(SILENT_FRAME);
      }
    }
    this.expected = (timestamp + mulaw.length) % 2 ** 32;
    this.hear(mulaw);
  }

  /** The time allowed is over: the verdict as it stands (`unknown` when nothing was decided). */
  timeUp(): void {
    if (this.done) return;
    this.say(this.detector.timeUp());
  }

  /** Stops listening without a verdict (the call ended). */
  stop(): void {
    this.done = true;
  }

  private hear(mulaw: Uint8Array): void {
    const verdict = this.detector.mulaw(mulaw);
    if (verdict) this.say(verdict);
  }

  private say(verdict: AudioVerdict): void {
    this.done = true;
    this.decided(verdict);
  }
}
