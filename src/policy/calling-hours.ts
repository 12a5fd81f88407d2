// Calling hours, as pure functions: an organization's weekly windows of local wall-clock time,
// and, for a set of IANA time zones and an instant, whether every zone is inside a window now and
// the next instant at which every zone is. All time-zone arithmetic goes through the tz database
// (Luxon over Intl), never a fixed offset, so daylight-saving days come out right: on a day that
// springs forward a window's missing hour is simply never inside, and on a day that falls back
// the repeated hour is inside twice.
import { createRequire } from 'node:module';
import type * as Luxon from 'luxon';

// Luxon (over half a megabyte of heap once loaded) is required on the first question about a time
// zone, not imported: the nodes of organizations without calling hours never ask one.
const require = createRequire(import.meta.url);
let luxon: typeof Luxon | undefined;
const tzdb = (): typeof Luxon => (luxon ??= require('luxon') as typeof Luxon);

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

export type OutsideHours = 'defer' | 'refuse';

/** The organization setting, as stored and shown (`dialtone org set-calling-hours`). */
export interface CallingHours {
  /** Where the callee's zone is unknown (no zone for the number, or a SIP URI). */
  timezone: string;
  outside: OutsideHours;
  /** Per weekday, `HH:MM-HH:MM` windows of local time; a missing day has none. */
  windows: Partial<Record<Weekday, string[]>>;
}

/** A window in minutes of the local day: `start` inclusive, `end` exclusive (1440 = midnight at the end). */
interface Window {
  start: number;
  end: number;
}

/** Parsed windows indexed by Luxon weekday (1 = Monday … 7 = Sunday). */
type WeekWindows = Window[][];

export interface SettingProblem {
  pointer: string;
  detail: string;
}

const WINDOW_PATTERN = /^(\d{2}):(\d{2})-(\d{2}):(\d{2})$/;
const OUTSIDE_VALUES: readonly OutsideHours[] = ['defer', 'refuse'];

function minutesOf(hours: string, minutes: string): number {
  return Number(hours) * 60 + Number(minutes);
}

/** True when the tz database knows this zone name. */
export function isKnownTimeZone(zone: string): boolean {
  return tzdb().IANAZone.isValidZone(zone);
}

/** Validates a setting, listing every problem with its JSON pointer; the parsed setting when there is none. */
export function parseCallingHours(value: unknown): { ok: true; hours: CallingHours } | { ok: false; problems: SettingProblem[] } {
  const problems: SettingProblem[] = [];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, problems: [{ pointer: '', detail: 'Calling hours are a JSON object with timezone, outside and windows.' }] };
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!['timezone', 'outside', 'windows'].includes(key)) problems.push({ pointer: `/${key}`, detail: `Unknown field "${key}".` });
  }
  if (typeof record.timezone !== 'string' || !isKnownTimeZone(record.timezone)) {
    problems.push({ pointer: '/timezone', detail: 'Required: an IANA time zone name such as "America/New_York" (the zone used when the callee\'s is unknown).' });
  }
  if (typeof record.outside !== 'string' || !OUTSIDE_VALUES.includes(record.outside as OutsideHours)) {
    problems.push({ pointer: '/outside', detail: 'Required: "defer" (queue the call until the next window) or "refuse" (answer 422).' });
  }
  const windows = record.windows;
  let count = 0;
  if (typeof windows !== 'object' || windows === null || Array.isArray(windows)) {
    problems.push({ pointer: '/windows', detail: 'Required: an object of weekdays (mon … sun), each a list of "HH:MM-HH:MM" windows.' });
  } else {
    for (const [day, list] of Object.entries(windows as Record<string, unknown>)) {
      if (!(WEEKDAYS as readonly string[]).includes(day)) {
        problems.push({ pointer: `/windows/${day}`, detail: `"${day}" is not a weekday; use mon, tue, wed, thu, fri, sat, sun.` });
        continue;
      }
      if (!Array.isArray(list)) {
        problems.push({ pointer: `/windows/${day}`, detail: 'A list of "HH:MM-HH:MM" windows (an empty list or a missing day means no calls that day).' });
        continue;
      }
      list.forEach((item, index) => {
        const pointer = `/windows/${day}/${index}`;
        const match = typeof item === 'string' ? WINDOW_PATTERN.exec(item) : null;
        if (!match) {
          problems.push({ pointer, detail: 'A window is "HH:MM-HH:MM" in 24-hour local time, e.g. "09:00-17:30".' });
          return;
        }
        const [, sh = '', sm = '', eh = '', em = ''] = match;
        const start = minutesOf(sh, sm);
        const end = minutesOf(eh, em);
        if (Number(sh) > 23 || Number(sm) > 59 || Number(em) > 59 || end > 1440) {
          problems.push({ pointer, detail: `"${String(item)}" is not a time of day (00:00 to 23:59; a window may end at 24:00).` });
        } else if (start >= end) {
          problems.push({ pointer, detail: `"${String(item)}" ends before it starts; a window lies within one day (split one that crosses midnight).` });
        } else {
          count += 1;
        }
      });
    }
    if (count === 0 && problems.length === 0) {
      problems.push({ pointer: '/windows', detail: 'At least one window is needed: with none, no call could ever be placed.' });
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, hours: { timezone: record.timezone as string, outside: record.outside as OutsideHours, windows: windows as CallingHours['windows'] } };
}

/**
 * The parsed windows of a setting, built once per setting object: the claim checks a whole batch of
 * runs (twice each, now and at the end of the lookahead) against one organization's setting.
 */
const parsedWeeks = new WeakMap<CallingHours, WeekWindows>();

function weekWindows(hours: CallingHours): WeekWindows {
  const parsed = parsedWeeks.get(hours);
  if (parsed) return parsed;
  const week = parseWeekWindows(hours);
  parsedWeeks.set(hours, week);
  return week;
}

function parseWeekWindows(hours: CallingHours): WeekWindows {
  const week: WeekWindows = [[]];
  for (const day of WEEKDAYS) {
    week.push(
      (hours.windows[day] ?? []).map((text) => {
        const [, sh = '', sm = '', eh = '', em = ''] = WINDOW_PATTERN.exec(text) ?? [];
        return { start: minutesOf(sh, sm), end: minutesOf(eh, em) };
      }),
    );
  }
  return week;
}

function insideZone(week: WeekWindows, zone: string, instant: number): boolean {
  const local = tzdb().DateTime.fromMillis(instant, { zone });
  const minute = local.hour * 60 + local.minute + local.second / 60;
  return (week[local.weekday] ?? []).some((w) => minute >= w.start && minute < w.end);
}

/** True when `instant` is inside a window in every one of `zones`. */
export function insideCallingHours(hours: CallingHours, zones: readonly string[], instant: number): boolean {
  const week = weekWindows(hours);
  return zones.every((zone) => insideZone(week, zone, instant));
}

/** Days searched ahead: a week repeats, plus room for a daylight-saving shift and the current day. */
const HORIZON_DAYS = 9;
const MINUTE = 60_000;
const DAY = 86_400_000;

/**
 * A zone's UTC offsets over the search horizon, read from the tz database once: the offset is
 * sampled every 24 h and each change is located to the millisecond, so every later question
 * ("what is the local time at this instant?") is arithmetic instead of an Intl call. This is what
 * makes a search over many zones cheap (a toll-free NANP number maps to 42 zones); zones change
 * offset at most a few times a year, never twice within a day.
 */
class ZoneTimeline {
  /** Segment starts (ascending) and the offset, in minutes, from each start on. */
  private readonly starts: number[] = [];
  private readonly offsets: number[] = [];

  constructor(zone: string, from: number, to: number) {
    const tz = tzdb().IANAZone.create(zone);
    let at = from;
    let offset = tz.offset(at);
    this.starts.push(Number.NEGATIVE_INFINITY);
    this.offsets.push(offset);
    while (at < to) {
      const next = at + DAY;
      const nextOffset = tz.offset(next);
      if (nextOffset !== offset) {
        this.starts.push(offsetChange(tz, at, next));
        this.offsets.push(nextOffset);
        offset = nextOffset;
      }
      at = next;
    }
  }

  offsetAt(instant: number): number {
    let i = this.starts.length - 1;
    while (i > 0 && (this.starts[i] as number) > instant) i--;
    return this.offsets[i] as number;
  }

  /** Offset changes inside the timeline. */
  changes(): number[] {
    return this.starts.slice(1);
  }

  /** Local weekday (1 = Monday … 7 = Sunday) and minute of the day at `instant`. */
  local(instant: number): { weekday: number; minute: number } {
    const wall = new Date(instant + this.offsetAt(instant) * MINUTE);
    return { weekday: ((wall.getUTCDay() + 6) % 7) + 1, minute: wall.getUTCHours() * 60 + wall.getUTCMinutes() + wall.getUTCSeconds() / 60 };
  }

  inside(week: WeekWindows, instant: number): boolean {
    const { weekday, minute } = this.local(instant);
    return (week[weekday] ?? []).some((w) => minute >= w.start && minute < w.end);
  }

  /**
   * The instants at which windows can open: each window start on each local day of the horizon
   * (both readings of a wall time that a fall-back day repeats), and each offset change (on a
   * spring-forward day a window starting in the skipped hour opens at the jump).
   */
  openings(week: WeekWindows, from: number): number[] {
    const candidates = this.changes();
    // Local midnights, as wall clock read as UTC, from the day before `from` on.
    const firstWallDay = Math.floor((from + this.offsetAt(from) * MINUTE) / DAY) * DAY - DAY;
    const offsets = [...new Set(this.offsets)];
    for (let d = 0; d <= HORIZON_DAYS; d++) {
      const wallMidnight = firstWallDay + d * DAY;
      const weekday = ((new Date(wallMidnight).getUTCDay() + 6) % 7) + 1;
      for (const w of week[weekday] ?? []) {
        for (const offset of offsets) {
          // A wall time is the instant wall - offset for whichever offset is in force then.
          const instant = wallMidnight + w.start * MINUTE - offset * MINUTE;
          if (this.offsetAt(instant) === offset) candidates.push(instant);
        }
      }
    }
    return candidates;
  }
}

/** The first millisecond of a new offset between `before` and `after` (which have different offsets). */
function offsetChange(tz: Luxon.IANAZone, before: number, after: number): number {
  const initial = tz.offset(before);
  let low = before;
  let high = after;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (tz.offset(middle) === initial) low = middle;
    else high = middle;
  }
  return high;
}

/**
 * The first instant at or after `from` when every zone is inside a window (`from` itself when it
 * is), or null when the zones' windows never meet (they are too many hours apart).
 */
export function nextCallingInstant(hours: CallingHours, zones: readonly string[], from: number): number | null {
  const week = weekWindows(hours);
  if (zones.every((zone) => insideZone(week, zone, from))) return from;
  const timelines = zones.map((zone) => new ZoneTimeline(zone, from - 2 * DAY, from + (HORIZON_DAYS + 2) * DAY));
  // Where every zone is inside, the earliest instant is one at which some zone's window opened.
  const candidates = [...new Set(timelines.flatMap((timeline) => timeline.openings(week, from)))].filter((instant) => instant > from).sort((a, b) => a - b);
  for (const instant of candidates) {
    if (timelines.every((timeline) => timeline.inside(week, instant))) return instant;
  }
  return null;
}
