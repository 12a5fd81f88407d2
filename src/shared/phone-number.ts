// Destination numbers. libphonenumber-js with its full ("max") metadata decides validity, so a
// number with a real country code but an impossible or unassigned range is refused before anything
// is dialed. Input must be international (leading +): Dialtone has no notion of a caller's country.
import { createRequire } from 'node:module';
import type * as LibPhoneNumber from 'libphonenumber-js/max';

// Its CommonJS build, required: the ES build is some ninety modules whose records Node's ES loader
// keeps besides the code, about 0.6 MB more heap for the same functions and metadata.
// telephony/configurations.ts requires the same build, so a process holds one copy.
const { parsePhoneNumberFromString } = createRequire(import.meta.url)('libphonenumber-js/max') as typeof LibPhoneNumber;

export type Destination = { kind: 'e164'; value: string } | { kind: 'sip_uri'; value: string };

const SIP_URI = /^sips?:[^\s@]+@[A-Za-z0-9.\-[\]:]+(;[^\s]*)?$/;

export type ParsedDestination = { ok: true; destination: Destination } | { ok: false; detail: string };

export function parseDestination(input: string): ParsedDestination {
  const text = input.trim();
  if (/^sips?:/i.test(text)) {
    return SIP_URI.test(text)
      ? { ok: true, destination: { kind: 'sip_uri', value: text } }
      : { ok: false, detail: `"${input}" is not a valid SIP URI (sip:user@host).` };
  }
  if (!text.startsWith('+')) {
    return { ok: false, detail: `"${input}" is not in international format: start with + and the country code (E.164).` };
  }
  const parsed = parsePhoneNumberFromString(text);
  if (!parsed || !parsed.isValid()) {
    return { ok: false, detail: `"${input}" is not a valid, dialable phone number.` };
  }
  if (parsed.ext) {
    // Dropping the extension silently would ring the main line instead of the person asked for.
    return { ok: false, detail: `"${input}" has an extension; extensions cannot be dialed.` };
  }
  return { ok: true, destination: { kind: 'e164', value: parsed.number } };
}
