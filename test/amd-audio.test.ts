// The machine detector's rules on audio made in the test itself (no espeak-ng, no sox): bursts of
// noise shaped like syllables stand for speech, a sine for a voicemail's beep. Driven by frame
// counts alone: no clock, no waiting. The labelled set's accuracy is amd-audio-accuracy.test.ts's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import alawmulaw from 'alawmulaw';
import { loadConfig } from '../src/config.js';
import { CallMachineListener } from '../src/telephony/media/machine-detection/call-listener.js';
import { DEFAULT_TUNING, MachineDetector, type AudioVerdict, type DetectMode } from '../src/telephony/media/machine-detection/machine-detector.js';
import { dominantTone } from '../src/telephony/media/machine-detection/tone.js';

const RATE = 8000;

/** A repeatable pseudo-random sequence (a linear congruential generator), so every run hears the same noise. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31 - 0.5;
  };
}

const next = random(7);

/** "Speech": noise at `amplitude` in 200 ms syllables 60 ms apart, `ms` long in all. */
function talk(ms: number, amplitude = 6_000): Int16Array {
  const out = new Int16Array((ms * RATE) / 1000);
  for (let i = 0; i < out.length; i++) {
    const inSyllable = (i % (0.26 * RATE)) < 0.2 * RATE;
    out[i] = inSyllable ? Math.round(next() * 2 * amplitude) : 0;
  }
  return out;
}

const quiet = (ms: number, amplitude = 0): Int16Array => Int16Array.from({ length: (ms * RATE) / 1000 }, () => Math.round(next() * 2 * amplitude));

const sine = (hz: number, ms: number, amplitude = 12_000): Int16Array =>
  Int16Array.from({ length: (ms * RATE) / 1000 }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / RATE)));

function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** Feeds `audio` in 20 ms frames until a verdict; the time is up when it ends. */
function classify(audio: Int16Array, mode: DetectMode = 'message_end', tuning = DEFAULT_TUNING) {
  const detector = new MachineDetector(tuning, mode);
  for (let offset = 0; offset + 160 <= audio.length && !detector.decided; offset += 160) detector.frame(audio.subarray(offset, offset + 160));
  return detector.decided ?? detector.timeUp();
}

describe('machine detection from a call\'s audio', () => {
  it('is tuned by default as SIP_AMD_* are by default, and those as TWILIO_AMD_* (the accuracy measured is the one a call gets)', () => {
    const config = loadConfig({});
    assert.deepEqual(
      {
        timeoutMs: config.SIP_AMD_TIMEOUT_MS,
        speechThresholdMs: config.SIP_AMD_SPEECH_THRESHOLD_MS,
        speechEndThresholdMs: config.SIP_AMD_SPEECH_END_THRESHOLD_MS,
        silenceTimeoutMs: config.SIP_AMD_SILENCE_TIMEOUT_MS,
        maxWords: config.SIP_AMD_MAX_WORDS,
        beepMinMs: config.SIP_AMD_BEEP_MIN_MS,
        voiceMarginDb: config.SIP_AMD_VOICE_MARGIN_DB,
        faxToneMinMs: config.SIP_AMD_FAX_TONE_MIN_MS,
      },
      DEFAULT_TUNING,
    );
    assert.deepEqual(
      [config.SIP_AMD_TIMEOUT_MS, config.SIP_AMD_SPEECH_THRESHOLD_MS, config.SIP_AMD_SPEECH_END_THRESHOLD_MS, config.SIP_AMD_SILENCE_TIMEOUT_MS],
      [config.TWILIO_AMD_TIMEOUT_MS, config.TWILIO_AMD_SPEECH_THRESHOLD_MS, config.TWILIO_AMD_SPEECH_END_THRESHOLD_MS, config.TWILIO_AMD_SILENCE_TIMEOUT_MS],
    );
  });

  it('says human for a short greeting followed by silence, once the silence has lasted the speech end threshold', () => {
    const verdict = classify(concat(quiet(300), talk(700), quiet(4_000)));
    assert.equal(verdict.raw, 'human');
    assert.equal(verdict.answeredBy, 'human');
    // The greeting ends about 1 s in; the verdict comes 1.2 s (SIP_AMD_SPEECH_END_THRESHOLD_MS) of silence later.
    assert.ok(verdict.afterMs >= 2_100 && verdict.afterMs <= 2_400, `${verdict.afterMs} ms`);
  });

  it('says machine_start with detect "on" as soon as a greeting outlasts the speech threshold', () => {
    const verdict = classify(concat(quiet(200), talk(6_000), quiet(3_000)), 'on');
    assert.equal(verdict.raw, 'machine_start');
    assert.equal(verdict.answeredBy, 'machine');
    assert.ok(verdict.afterMs >= 2_600 && verdict.afterMs <= 2_800, `${verdict.afterMs} ms`);
  });

  it('waits for a machine\'s beep with detect "message_end", and says machine_end_beep once the beep has ended', () => {
    const verdict = classify(concat(quiet(200), talk(5_000), quiet(400), sine(1_000, 500), quiet(3_000)));
    assert.equal(verdict.raw, 'machine_end_beep');
    assert.match(verdict.why, /beep at 1000 Hz/);
    // Said once the beep is over (a message is never spoken over it): 6.1 s of audio and one frame.
    assert.ok(verdict.afterMs >= 6_100 && verdict.afterMs <= 6_200, `${verdict.afterMs} ms`);
  });

  it('says machine_end_silence for a greeting that ends without a beep', () => {
    const verdict = classify(concat(quiet(200), talk(5_000), quiet(4_000)));
    assert.equal(verdict.raw, 'machine_end_silence');
  });

  it('takes a beep for a machine\'s even after a short greeting, and whatever its frequency between 400 and 2000 Hz', () => {
    for (const hz of [440, 1_000, 1_400, 1_950]) {
      assert.equal(classify(concat(quiet(200), talk(800), quiet(300), sine(hz, 300), quiet(3_000))).raw, 'machine_end_beep', `${hz} Hz`);
    }
  });

  it('does not take a tone shorter than SIP_AMD_BEEP_MIN_MS for a beep', () => {
    assert.equal(classify(concat(quiet(200), sine(1_000, 80), quiet(4_000))).raw, 'human');
  });

  it('says unknown after the silence timeout when nobody speaks, on a silent line and over steady noise alike', () => {
    for (const audio of [quiet(8_000), quiet(8_000, 300), quiet(8_000, 3_000)]) {
      const verdict = classify(audio);
      assert.equal(verdict.raw, 'unknown');
      assert.equal(verdict.afterMs, DEFAULT_TUNING.silenceTimeoutMs);
    }
  });

  it('hears a person over steady background noise: the noise floor adapts', () => {
    const noise = quiet(5_700, 500);
    const speech = concat(new Int16Array(RATE), talk(700, 8_000));
    assert.equal(classify(noise.map((sample, i) => sample + (speech[i] ?? 0))).raw, 'human');
  });

  it('is not confused by digital silence between words over a noisy line (an endpoint suppressing silence)', () => {
    assert.equal(classify(concat(quiet(1_000, 500), talk(700, 8_000), quiet(4_000, 500))).raw, 'human');
  });

  it('says a greeting of many short words is a machine\'s, before the speech threshold, at SIP_AMD_MAX_WORDS words', () => {
    const words = concat(...Array.from({ length: 8 }, () => concat(talk(150), quiet(150))));
    const verdict = classify(concat(quiet(200), words, quiet(4_000)), 'on', { ...DEFAULT_TUNING, speechThresholdMs: 6_000 });
    assert.equal(verdict.raw, 'machine_start');
    assert.match(verdict.why, /6 words/);
  });

  it('follows its tuning: a longer speech threshold hears the same greeting as a person\'s', () => {
    const audio = concat(quiet(200), talk(2_000), quiet(4_000));
    assert.equal(classify(audio, 'on').raw, 'human');
    assert.equal(classify(audio, 'on', { ...DEFAULT_TUNING, speechThresholdMs: 1_500 }).raw, 'machine_start');
  });

  it('says unknown at the timeout for audio that never settles, and machine_end_other for a machine whose end never came', () => {
    const tuning = { ...DEFAULT_TUNING, timeoutMs: 4_000, speechThresholdMs: 1_000 };
    assert.equal(classify(concat(quiet(200), talk(10_000)), 'message_end', tuning).raw, 'machine_end_other');
    const nothing = new MachineDetector(tuning, 'message_end');
    assert.equal(nothing.timeUp().raw, 'unknown');
  });

  it('takes μ-law in chunks of any size, with the verdict the same frames give', () => {
    const audio = concat(quiet(200), talk(5_000), quiet(400), sine(1_000, 500), quiet(3_000));
    const bytes = alawmulaw.mulaw.encode(audio);
    const detector = new MachineDetector(DEFAULT_TUNING, 'message_end');
    for (let offset = 0; offset < bytes.length && !detector.decided; offset += 237) detector.mulaw(bytes.subarray(offset, offset + 237));
    assert.equal(detector.decided?.raw, 'machine_end_beep');
    assert.equal(detector.decided?.afterMs, classify(audio).afterMs);
  });

  it('finds a frame\'s dominant tone by Goertzel filters, pure for a sine and impure for noise', () => {
    const tone = dominantTone(sine(1_234, 20), { minHz: 400, maxHz: 2_000 });
    assert.ok(Math.abs(tone.frequency - 1_234) <= 5, `${tone.frequency} Hz`);
    assert.ok(tone.purity > 0.9, `${tone.purity}`);
    assert.ok(dominantTone(quiet(20, 5_000), { minHz: 400, maxHz: 2_000 }).purity < 0.3);
  });
});

describe('machine detection on a call\'s RTP audio', () => {
  /** `audio` as 20 ms μ-law packets with RTP timestamps from `base`, those `dropped` (packet indexes) never sent. */
  function packets(audio: Int16Array, base: number, dropped: (index: number) => boolean = () => false) {
    const bytes = alawmulaw.mulaw.encode(audio);
    const out: Array<{ payload: Uint8Array; timestamp: number }> = [];
    for (let i = 0; i * 160 + 160 <= bytes.length; i++) if (!dropped(i)) out.push({ payload: bytes.subarray(i * 160, i * 160 + 160), timestamp: (base + i * 160) % 2 ** 32 });
    return out;
  }

  function listen(list: Array<{ payload: Uint8Array; timestamp: number }>, mode: DetectMode = 'message_end') {
    const verdicts: AudioVerdict[] = [];
    const listener = new CallMachineListener(DEFAULT_TUNING, mode, (verdict) => verdicts.push(verdict));
    for (const packet of list) listener.audio(packet.payload, packet.timestamp);
    return { verdicts, listener };
  }

  it('hears the silence of an endpoint that sends nothing after "Hello?" from the gap in the RTP timestamps', () => {
    // 1 s of speech after 300 ms, then no packet for 3 s, then one: the gap is 3 s of silence.
    const audio = concat(quiet(300), talk(700), quiet(3_000, 200), quiet(20, 200));
    const { verdicts } = listen(packets(audio, 4_000_000_000, (i) => i >= 50 && i < 200));
    assert.deepEqual(verdicts.map((v) => v.raw), ['human']);
  });

  it('does not hear a packet from the past twice (reordered or repeated), across the timestamp\'s wrap', () => {
    const list = packets(concat(quiet(200), talk(5_000), quiet(400), sine(1_000, 500), quiet(3_000)), 2 ** 32 - 16_000);
    const repeated = list.flatMap((packet, i) => (i % 10 === 5 ? [packet, list[i - 3] ?? packet] : [packet]));
    const once = listen(list).verdicts;
    const twice = listen(repeated).verdicts;
    assert.equal(once[0]?.raw, 'machine_end_beep');
    assert.deepEqual(twice, once);
  });

  it('says its verdict once, and at timeUp the verdict as it stands when no audio came', () => {
    const { verdicts, listener } = listen([]);
    listener.timeUp();
    listener.timeUp();
    assert.deepEqual(verdicts.map((v) => v.raw), ['unknown']);
    const stopped = new CallMachineListener(DEFAULT_TUNING, 'on', (verdict) => verdicts.push(verdict));
    stopped.stop();
    stopped.timeUp();
    assert.equal(verdicts.length, 1, 'a listener stopped (the call ended) says nothing');
  });
});
