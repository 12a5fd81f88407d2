// A blind transfer over SIP (RFC 3515): the REFER's headers, and following the implicit
// subscription it creates: the far end reports the transferee's call to the target in NOTIFYs
// whose `message/sipfrag` body (RFC 3420) is a status line ("SIP/2.0 100 Trying", then a final one),
// until `Subscription-State: terminated`. The dialog and the sending are provider.ts's; this module
// says what to write and what each NOTIFY means. Own code: the `sip` package has no REFER or
// subscription handling, and no maintained Node package does this over our transport.
import type * as sip from 'sip';
import type { TransferResult } from '../provider.js';
import type { SipTrunk } from './settings.js';

const E164 = /^\+[1-9]\d{1,14}$/;
/** A sip:/sips: URI with nothing that could end the header it is written in (`>`, quotes, spaces, line breaks). */
const SIP_URI = /^sips?:[^\s<>"]+$/;

/**
 * The Refer-To URI: a SIP URI as given, an E.164 number at the trunk (`sip:+12025550123@host:port`,
 * as the INVITE's Request-URI is written), so the transferee's side places the new call through the
 * same trunk. Throws RangeError on anything else: the HTTP layer checks targets, and this is the last
 * guard before the text goes into a header.
 */
export function referToUri(to: string, trunk: Pick<SipTrunk, 'host' | 'port'>): string {
  if (E164.test(to)) return `sip:${to}@${trunk.host}:${trunk.port}`;
  if (SIP_URI.test(to)) return to;
  throw new RangeError('A transfer target is an E.164 number or a sip:/sips: URI');
}

/** The REFER's own headers (the dialog's are provider.ts's): where to go and who asks (Referred-By, RFC 3892). */
export function referHeaders(referTo: string, referrer: string): sip.SipHeaders {
  return { 'refer-to': `<${referTo}>`, 'referred-by': `<${referrer}>` };
}

/** The status line a sipfrag body starts with, or undefined when it has none. */
export function sipfragStatus(body: string | undefined): { status: number; line: string } | undefined {
  const line = (body ?? '').trimStart().split(/\r?\n/, 1)[0]?.trim() ?? '';
  const match = /^SIP\/2\.0 ([1-6]\d\d)(?: .*)?$/.exec(line);
  return match ? { status: Number(match[1]), line: line.slice('SIP/2.0 '.length) } : undefined;
}

/** A final status of the transferee's call to the target, in Dialtone's terms. */
export function transferResultOf(status: number): Exclude<TransferResult, 'refused'> {
  if (status >= 200 && status < 300) return 'answered';
  if (status === 486 || status === 600) return 'busy';
  if (status === 408 || status === 480 || status === 487) return 'no_answer';
  return 'failed';
}

/** The header's value as text: the `sip` package keeps unknown headers as strings. */
const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/** Whether a NOTIFY belongs to a REFER's subscription (`Event: refer`, with or without `;id=`). */
export const isReferNotify = (request: sip.SipMessage): boolean => /^refer\s*(;|$)/i.test(text(request.headers.event ?? request.headers.o).trim());

/**
 * One transfer under way: what its NOTIFYs say, reported once. The final status counts only once
 * the REFER was accepted (a NOTIFY may overtake the 202 over UDP): it is held until then. Without a
 * final status `timeoutMs` after the acceptance, the transfer is reported failed.
 */
export class TransferWatch {
  private timer: NodeJS.Timeout | undefined;
  private accepted = false;
  private held: { result: Exclude<TransferResult, 'refused'>; raw: string } | undefined;
  private settled = false;

  constructor(
    private readonly timeoutMs: number,
    private readonly report: (result: Exclude<TransferResult, 'refused'>, raw: string) => void,
  ) {}

  get done(): boolean {
    return this.settled;
  }

  /** The REFER was answered 2xx: the wait for the final NOTIFY starts. */
  accept(): void {
    if (this.settled || this.accepted) return;
    this.accepted = true;
    if (this.held) return this.finish(this.held.result, this.held.raw);
    this.timer = setTimeout(() => this.finish('failed', `No final NOTIFY within ${this.timeoutMs} ms`), this.timeoutMs);
  }

  /** The REFER was refused (or never answered): nothing is reported here, the caller throws. */
  abandon(): void {
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /**
   * Applies a NOTIFY of this subscription (the provider answers each 200 OK, even one whose body it
   * cannot read: a refusal could end the subscription before its final status).
   */
  notify(request: sip.SipMessage): void {
    if (this.settled) return;
    const frag = sipfragStatus(request.content);
    const terminated = /^terminated\b/i.test(text(request.headers['subscription-state']).trim());
    // 1xx is progress (the target rings): nothing to report until a final status or the end.
    if (frag && frag.status >= 200) this.final(transferResultOf(frag.status), frag.line);
    else if (terminated) this.final('failed', frag ? `Subscription terminated at ${frag.line}` : 'Subscription terminated without a final status');
  }

  private final(result: Exclude<TransferResult, 'refused'>, raw: string): void {
    if (this.accepted) this.finish(result, raw);
    else this.held ??= { result, raw };
  }

  private finish(result: Exclude<TransferResult, 'refused'>, raw: string): void {
    if (this.settled) return;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    this.report(result, raw);
  }
}
