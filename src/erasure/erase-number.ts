// Erasure of a person: one phone number removed from everything an organization's runs, their
// events, webhook deliveries, campaign contacts and Idempotency-Key records hold of it, in one
// transaction (docs/operations.md, "Erasure", lists every place and what becomes of it). The HTTP
// route (DELETE /phone-numbers/{phone_number}/data) and the CLI (`dialtone erase-number`) both call
// eraseNumber. A run that has not ended refuses the whole erasure (409 runs_not_ended, listing
// them): its call may still write the number, and its webhook messages are still to come. An
// erasure done is never undone, and a second one finds nothing: every count is then 0.
import type { Logger } from 'pino';
import { recordAuditEvent, type AuditActor } from '../audit/audit-log.js';
import { DialtoneError } from '../errors.js';
import { maskPhoneNumber } from '../logging.js';
import { TERMINAL_STATES } from '../runs/states.js';
import { parseDestination } from '../shared/phone-number.js';
import type { Store } from '../store/engine/store.js';
import { eraseContacts, eraseRuns, selectRunsOfNumber, suppressForGood, type ErasureCounts } from '../store/statements/erasure-statements.js';

export type { ErasureCounts };
/** The CLI's actor for the audit log, so that the CLI needs only this module. */
export { CLI_ACTOR } from '../audit/audit-log.js';

export interface ErasureContext {
  store: Pick<Store, 'transaction' | 'truncateWal'>;
  clock: { now(): number };
  logger: Pick<Logger, 'info' | 'warn'>;
}

export interface ErasureOptions {
  /** Also put the number on the suppression list for good, in the same transaction. */
  suppress: boolean;
  /** Who asked, for the audit log: an API key or the CLI. */
  actor: AuditActor;
}

export interface ErasureResult {
  phone_number: string;
  /** Rows changed per table; all 0 when nothing of the number was left. */
  counts: ErasureCounts;
}

/** The reason a suppression made by an erasure carries. */
export const ERASURE_SUPPRESSION_REASON = 'erasure';

/** The number in E.164, or 422 invalid_phone_number (a SIP URI is no phone number). */
function normalize(input: string): string {
  const parsed = parseDestination(input);
  if (parsed.ok && parsed.destination.kind === 'e164') return parsed.destination.value;
  const detail = parsed.ok ? `"${input}" is a SIP URI; only phone numbers are erased.` : parsed.detail;
  throw new DialtoneError('invalid_phone_number', detail, { errors: [{ pointer: '/phone_number', detail }] });
}

const TERMINAL: readonly string[] = TERMINAL_STATES;

export async function eraseNumber(ctx: ErasureContext, orgId: number, input: string, options: ErasureOptions): Promise<ErasureResult> {
  const phoneNumber = normalize(input);
  const now = ctx.clock.now();
  const counts = await ctx.store.transaction('durable', async (trx) => {
    const runs = await selectRunsOfNumber(trx, orgId, phoneNumber);
    const unended = runs.filter((run) => !TERMINAL.includes(run.state));
    if (unended.length > 0) {
      throw new DialtoneError('runs_not_ended', `The organization has ${unended.length} run(s) to this number that have not ended (${unended.map((r) => r.name ?? r.id).join(', ')}); cancel them or wait for them to end, then erase again. Nothing was changed.`, {
        extra: { runs: unended.map((r) => ({ id: r.id, name: r.name, state: r.state })) },
      });
    }
    const erased = await eraseRuns(trx, runs.map((r) => r.id));
    const contacts = await eraseContacts(trx, orgId, phoneNumber, now);
    const suppressions = options.suppress ? await suppressForGood(trx, orgId, phoneNumber, ERASURE_SUPPRESSION_REASON, now) : 0;
    const counts: ErasureCounts = { ...erased, campaign_contacts: contacts, suppressions };
    // In the erasure's transaction, with the number masked: never whole, it is what was erased.
    const masked = maskPhoneNumber(phoneNumber);
    await recordAuditEvent(trx, { orgId, actor: options.actor, action: 'phone_number.erased', target: { type: 'phone_number', id: masked }, after: { phone_number: masked, suppress: options.suppress, counts }, at: now });
    return counts;
  });
  // The pages overwritten are still in SQLite's write-ahead log until it is reused: truncate it now
  // if nobody holds it (Store.truncateWal).
  if (!(await ctx.store.truncateWal())) ctx.logger.warn('after an erasure, the write-ahead log was in use and could not be truncated now; its old pages are overwritten as it is reused');
  return { phone_number: phoneNumber, counts };
}
