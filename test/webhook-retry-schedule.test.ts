// The retry schedule is read from configuration (milliseconds or durations with units) and each
// delay is spread by ±10 %.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_RETRY_SCHEDULE, delayWithJitter, parseRetrySchedule } from '../src/webhooks/retry-schedule.js';

describe('parseRetrySchedule', () => {
  it('reads the default schedule as eight delays in milliseconds', () => {
    const expected = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
    assert.deepEqual(parseRetrySchedule(DEFAULT_RETRY_SCHEDULE), expected);
    assert.deepEqual(parseRetrySchedule(), expected);
  });

  it('accepts bare milliseconds, units, fractions and spaces around entries', () => {
    assert.deepEqual(parseRetrySchedule('0, 250 ,1500,1.5s, 2 m,1h,1d'), [0, 250, 1500, 1500, 120_000, 3_600_000, 86_400_000]);
  });

  it('refuses an empty schedule', () => {
    assert.throws(() => parseRetrySchedule(''), /retry schedule is empty/);
    assert.throws(() => parseRetrySchedule('   '), /retry schedule is empty/);
  });

  it('refuses an empty entry, naming its position', () => {
    assert.throws(() => parseRetrySchedule('0,,5s'), /entry 2 is empty/);
    assert.throws(() => parseRetrySchedule('0,5s,'), /entry 3 is empty/);
  });

  it('refuses an entry that is not a duration, quoting it', () => {
    for (const bad of ['5x', 'soon', '1e3', 'Infinity', '5s5m']) {
      assert.throws(() => parseRetrySchedule(`0,${bad}`), new RegExp(`entry 2 "${bad}" is not a duration`), bad);
    }
  });

  it('refuses a negative delay', () => {
    assert.throws(() => parseRetrySchedule('0,-5s'), /entry 2 "-5s" is negative/);
    assert.throws(() => parseRetrySchedule('-1'), /entry 1 "-1" is negative/);
  });
});

describe('delayWithJitter', () => {
  it('keeps 0 at 0 whatever the draw', () => {
    for (const r of [0, 0.5, 0.999_999]) assert.equal(delayWithJitter(0, () => r), 0);
  });

  it('moves a delay by at most 10 % either way: 0.9× at the lowest draw, 1× in the middle, just under 1.1× at the highest', () => {
    assert.equal(delayWithJitter(10_000, () => 0), 9_000);
    assert.equal(delayWithJitter(10_000, () => 0.5), 10_000);
    assert.equal(delayWithJitter(10_000, () => 0.999_999), 11_000);
    assert.equal(delayWithJitter(10_000, () => 0.75), 10_500);
  });

  it('stays within the bounds and whole for many random draws', () => {
    for (let i = 0; i < 1_000; i++) {
      const d = delayWithJitter(300_000);
      assert.ok(d >= 270_000 && d <= 330_000, String(d));
      assert.ok(Number.isInteger(d));
    }
  });
});
