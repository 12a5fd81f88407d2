// Fax detection from a call's audio, on tones made in the test itself: CED (2100 Hz, plain and as
// ANSam with phase reversals), CNG (1100 Hz in its cadence), and what must not be taken for a fax
// (voicemail beeps, a lone 1100 Hz burst, a 2100 Hz tone shorter than SIP_AMD_FAX_TONE_MIN_MS).
// Driven by frame counts alone: no clock, no waiting. The labelled set's fax clips are in
// amd-audio-accuracy.test.ts's figures; a fax answering a real SIP call in sip-amd.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_TUNING, MachineDetector, type DetectMode } from '../src/telephony/media/machine-detection/machine-detector.js';

const RATE = 8000;

/** A repeatable pseudo-random sequence, so every run hears the same noise. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31 - 0.5;
  };
}

const next = random(11);

/** "Speech": noise in 200 ms syllables 60 ms apart. */
const talk = (ms: number, amplitude = 6_000): Int16Array =>
  Int16Array.from({ length: (ms * RATE) / 1000 }, (_, i) => (i % (0.26 * RATE) < 0.2 * RATE ? Math.round(next() * 2 * amplitude) : 0));

const quiet = (ms: number, amplitude = 0): Int16Array => Int16Array.from({ length: (ms * RATE) / 1000 }, () => Math.round(next() * 2 * amplitude));

const sine = (hz: number, ms: number, amplitude = 10_000): Int16Array =>
  Int16Array.from({ length: (ms * RATE) / 1000 }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / RATE)));

/** ANSam (V.8): 2100 Hz, its phase reversed every 450 ms, amplitude modulated by 20 % at 15 Hz. */
const ansam = (ms: number, amplitude = 10_000): Int16Array =>
  Int16Array.from({ length: (ms * RATE) / 1000 }, (_, i) => {
    const reversals = Math.floor(i / (0.45 * RATE));
    const envelope = 1 + 0.2 * Math.sin((2 * Math.PI * 15 * i) / RATE);
    return Math.round(amplitude * 0.8 * envelope * Math.sin((2 * Math.PI * 2_100 * i) / RATE + reversals * Math.PI));
  });

/** CNG: `bursts` of 1100 Hz, 500 ms on, `pauseMs` off. */
const cng = (bursts: number, pauseMs = 3_000): Int16Array => concat(...Array.from({ length: bursts }, () => concat(sine(1_100, 500), quiet(pauseMs))));

function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

const withNoise = (audio: Int16Array, amplitude: number) => audio.map((sample) => Math.max(-32768, Math.min(32767, sample + Math.round(next() * 2 * amplitude))));

function classify(audio: Int16Array, mode: DetectMode = 'message_end', tuning = DEFAULT_TUNING) {
  const detector = new MachineDetector(tuning, mode);
  for (let offset = 0; offset + 160 <= audio.length && !detector.decided; offset += 160) detector.frame(audio.subarray(offset, offset + 160));
  return detector.decided ?? detector.timeUp();
}

describe('fax detection from a call\'s audio', () => {
  it('says fax for a fax\'s answer tone (CED, 2100 Hz) once it has lasted SIP_AMD_FAX_TONE_MIN_MS, with either detect', () => {
    for (const mode of ['on', 'message_end'] as const) {
      const verdict = classify(concat(quiet(300), sine(2_100, 3_300), quiet(2_000)), mode);
      assert.equal(verdict.raw, 'fax', mode);
      assert.equal(verdict.answeredBy, 'fax');
      assert.match(verdict.why, /CED at 2\d{3} Hz for 1\.5 s/);
      // 300 ms of silence, then 1.5 s of the tone (SIP_AMD_FAX_TONE_MIN_MS's default).
      assert.ok(verdict.afterMs >= 1_800 && verdict.afterMs <= 1_860, `${verdict.afterMs} ms`);
    }
  });

  it('hears CED as ANSam too: its phase reversals every 450 ms and its 15 Hz modulation do not break the tone', () => {
    const verdict = classify(concat(quiet(200), ansam(3_300), quiet(2_000)));
    assert.equal(verdict.raw, 'fax', verdict.why);
    assert.ok(verdict.afterMs <= 1_760, `${verdict.afterMs} ms`);
  });

  it('takes CED within its tolerance (V.25: 2100 ±15 Hz), over noise, and after a short silence; not a tone at 2200 Hz', () => {
    for (const hz of [2_085, 2_100, 2_115]) assert.equal(classify(concat(quiet(1_500), withNoise(sine(hz, 3_000), 800), quiet(1_000))).raw, 'fax', `${hz} Hz`);
    assert.notEqual(classify(concat(quiet(200), sine(2_200, 3_000), quiet(4_000))).raw, 'fax');
  });

  it('does not take a 2100 Hz tone shorter than SIP_AMD_FAX_TONE_MIN_MS for a fax, and follows the setting', () => {
    const short = concat(quiet(200), sine(2_100, 1_000), quiet(6_000));
    assert.equal(classify(short).raw, 'unknown', 'a tone is no word: nobody spoke');
    assert.equal(classify(short, 'message_end', { ...DEFAULT_TUNING, faxToneMinMs: 800 }).raw, 'fax');
  });

  it('says fax for a fax calling (CNG, 1100 Hz, 0.5 s on and 3 s off) once its second burst has CNG\'s length, with either detect', () => {
    for (const mode of ['on', 'message_end'] as const) {
      const verdict = classify(concat(quiet(1_000), cng(3)), mode);
      assert.equal(verdict.raw, 'fax', `${mode}: ${verdict.why}`);
      assert.match(verdict.why, /CNG at 1100 Hz, 2 bursts/);
      // The second burst starts 4.5 s in; 400 ms of it (CNG's 0.5 s less its tolerance) make the fax.
      assert.ok(verdict.afterMs >= 4_880 && verdict.afterMs <= 4_960, `${verdict.afterMs} ms`);
    }
  });

  it('hears CNG in its cadence over line noise', () => {
    assert.equal(classify(withNoise(concat(quiet(300), cng(2)), 300)).raw, 'fax');
  });

  it('takes a lone 1100 Hz burst at the answer for a beep once the next CNG burst could no longer come', () => {
    const lone = concat(quiet(300), sine(1_100, 500), quiet(8_000));
    const ended = classify(lone);
    assert.equal(ended.raw, 'machine_end_beep');
    assert.match(ended.why, /beep at 1100 Hz/);
    // The pause a CNG burst may be followed by (3 s and its tolerance) has passed.
    assert.ok(ended.afterMs >= 4_200 && ended.afterMs <= 4_400, `${ended.afterMs} ms`);
    assert.equal(classify(lone, 'on').raw, 'machine_start');
  });

  it('does not take 1100 Hz bursts out of CNG\'s cadence for a fax (a pause of 1 s, or words in the pause)', () => {
    assert.notEqual(classify(concat(quiet(300), cng(3, 1_000), quiet(6_000))).raw, 'fax');
    const spoken = classify(concat(quiet(300), sine(1_100, 500), quiet(800), talk(5_000), sine(1_100, 500), quiet(4_000)));
    assert.notEqual(spoken.raw, 'fax');
  });

  it('says machine_end_beep at once for a voicemail\'s beep at 1100 Hz after its greeting (CNG is listened for before any word only)', () => {
    const verdict = classify(concat(quiet(200), talk(5_000), quiet(400), sine(1_100, 500), quiet(4_000)));
    assert.equal(verdict.raw, 'machine_end_beep');
    assert.ok(verdict.afterMs >= 6_100 && verdict.afterMs <= 6_200, `${verdict.afterMs} ms`);
  });

  it('never takes a voicemail\'s beep (400 to 2000 Hz, 0.2 to 1 s) for a fax, with or without a greeting before it', () => {
    for (const hz of [440, 1_000, 1_100, 1_400, 2_000]) {
      for (const ms of [200, 500, 1_000]) {
        for (const greeting of [[], [talk(3_000), quiet(400)]]) {
          const verdict = classify(concat(quiet(200), ...greeting, sine(hz, ms), quiet(6_000)));
          assert.notEqual(verdict.raw, 'fax', `${hz} Hz ${ms} ms${greeting.length ? ' after a greeting' : ''}`);
          assert.equal(verdict.answeredBy, 'machine', `${hz} Hz ${ms} ms: ${verdict.why}`);
        }
      }
    }
  });

  it('says fax for an answer tone after a greeting (a fax switch\'s prompt) with detect "message_end"', () => {
    const verdict = classify(concat(quiet(200), talk(3_000), quiet(300), sine(2_100, 3_000), quiet(2_000)));
    assert.equal(verdict.raw, 'fax', verdict.why);
  });

  it('says unknown at the timeout while a 2100 Hz tone is still short of SIP_AMD_FAX_TONE_MIN_MS (a tone under way is not yet a fax)', () => {
    const detector = new MachineDetector(DEFAULT_TUNING, 'message_end');
    const tone = sine(2_100, 1_000);
    for (let offset = 0; offset + 160 <= tone.length; offset += 160) assert.equal(detector.frame(tone.subarray(offset, offset + 160)), undefined);
    assert.equal(detector.timeUp().raw, 'unknown');
  });
});
