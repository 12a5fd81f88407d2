// DTMF as SIP INFO with an `application/dtmf-relay` body (`Signal=5`, `Duration=160`): what trunks
// accept while Dialtone carries no media of its own (RFC 4733 events need the RTP stream). Not an
// RFC, but the de facto format (Cisco's, which Asterisk, FreeSWITCH and most trunks take). One INFO
// per digit, each sent after the previous one was answered, so the far end plays them in order;
// `w` is a half-second pause between them.

/** How long each tone lasts, in the body's Duration (ms): the usual length, long enough for any IVR to detect. */
export const DTMF_TONE_MS = 160;
/** What `w` waits before the next digit (the contract's half second, provider.ts). */
export const DTMF_PAUSE_MS = 500;

const DIGITS = /^[0-9*#A-Dw]+$/;

export const DTMF_INFO_CONTENT_TYPE = 'application/dtmf-relay';

/** The body of the INFO for one digit. */
export function dtmfRelayBody(digit: string): string {
  return `Signal=${digit}\r\nDuration=${DTMF_TONE_MS}\r\n`;
}

/**
 * Plays `digits` through `sendDigit` (which resolves once the far end accepted it, and throws when
 * it refused: the rest are not sent), waiting `pause` for each `w`. Throws RangeError on anything
 * but 0-9, *, #, A-D and w: the HTTP layer checks digits, this is the last guard before a body.
 */
export async function playDigits(digits: string, sendDigit: (digit: string) => Promise<void>, pause: (ms: number) => Promise<void>): Promise<void> {
  if (!DIGITS.test(digits)) throw new RangeError('DTMF digits are 0-9, *, #, A-D, and w for a half-second pause');
  for (const digit of digits) {
    if (digit === 'w') await pause(DTMF_PAUSE_MS);
    else await sendDigit(digit);
  }
}
