// G.711 transcoding between the two laws a SIP callee may answer with: the Media Streams protocol is
// μ-law only, so a call answered in A-law (PCMA) is transcoded both ways. The `alawmulaw` package
// does the per-sample work (decode to 16-bit linear, encode to the other law).
import alawmulaw from 'alawmulaw';

/** The two G.711 laws. */
export type G711Codec = 'PCMU' | 'PCMA';

const { alaw, mulaw } = alawmulaw;

/** μ-law's digital silence (the code for a linear 0). */
export const MULAW_SILENCE = 0xff;

/** `payload` in `codec`, as μ-law bytes. */
export function toMulaw(codec: G711Codec, payload: Uint8Array): Uint8Array {
  return codec === 'PCMU' ? payload : mulaw.encode(alaw.decode(payload));
}

/** μ-law bytes as `codec`. */
export function fromMulaw(codec: G711Codec, frame: Uint8Array): Uint8Array {
  return codec === 'PCMU' ? frame : alaw.encode(mulaw.decode(frame));
}
