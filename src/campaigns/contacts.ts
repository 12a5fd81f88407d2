// A campaign's contacts: the import (a JSON array, or a CSV streamed through csv-parse like the
// suppression list's import) and the listing with each contact's attempts.
//
// An import is checked whole before anything is written: each contact's number (parsed and
// normalized like a run's, shared/phone-number.ts), time zone, initial_context (bounded like a
// request's) and the agent's required template variables. Invalid contacts are reported by index
// (JSON) or line (CSV) and skipped; a number given twice, or already in the campaign, counts as a
// duplicate. The valid ones are then written in one durable transaction, with the Idempotency-Key
// record when the request carries one (calls/idempotency.ts), so a retry gets the same answer, even
// once the campaign has ended: a key's stored answer is looked up before the campaign's state.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Deps } from '../deps.js';
import { DialtoneError, validationFailed } from '../errors.js';
import { claimIdempotencyKey, completeClaim, parseIdempotencyKey, releaseClaim, requestFingerprint, type Claim } from '../calls/idempotency.js';
import { jsonDepth } from '../calls/initiate-call.js';
import { parseDestination } from '../shared/phone-number.js';
import { admitTarget, variablesRefusal } from '../admission/admission.js';
import { readCsvBody } from '../shared/csv-body.js';
import { isKnownTimeZone } from '../policy/calling-hours.js';
import { iso } from '../runs/read-run.js';
import { bumpContactsVersion, insertContacts, selectContactAttempts, selectContactPage, type NewContactValues } from '../store/statements/campaign-statements.js';
import type { CampaignRow, ContactStatus, RunState } from '../store/schema/schema.js';
import type { DefinitionGraph } from '../workflows/definition.js';
import { campaignTarget, findCampaign } from './campaigns.js';
import { forget } from './progress-cache.js';

export interface ContactInput {
  phone_number: string;
  initial_context?: Record<string, unknown> | null;
  timezone?: string | null;
}

export interface InvalidContact {
  /** JSON: the item's index in the array. */
  index?: number;
  /** CSV: the line in the file (the header is line 1). */
  line?: number;
  detail: string;
}

export interface ImportAnswer {
  added: number;
  duplicates: number;
  invalid: InvalidContact[];
  invalid_count: number;
}

export interface ImportRequest {
  /** The raw Idempotency-Key header. */
  idempotencyKey: string | string[] | undefined;
  /** The request path, part of the Idempotency-Key's fingerprint. */
  path: string;
}

/** A campaign may take contacts until it ends. */
const OPEN_STATES: readonly CampaignRow['state'][] = ['draft', 'running', 'paused'];

/** Checks contacts one by one, keeping the valid ones (first of each number) and listing the rest. */
class ContactBatch {
  readonly valid = new Map<string, NewContactValues>();
  readonly invalid: InvalidContact[] = [];
  invalidCount = 0;
  repeated = 0;
  /** Items seen, whatever became of them. */
  private seen = 0;

  constructor(
    private readonly deps: Pick<Deps, 'config'>,
    private readonly graph: DefinitionGraph | undefined,
  ) {}

  add(where: { index: number } | { line: number }, input: ContactInput): void {
    // Every item counts toward the limit, invalid and repeated ones too: each costs its check.
    if (++this.seen > this.deps.config.CAMPAIGN_CONTACTS_MAX_PER_REQUEST) {
      const at = 'line' in where ? `Line ${where.line}: a` : 'A';
      throw validationFailed([{ pointer: '', detail: `${at}n import carries at most ${this.deps.config.CAMPAIGN_CONTACTS_MAX_PER_REQUEST} contacts, invalid and repeated ones included (CAMPAIGN_CONTACTS_MAX_PER_REQUEST); split the list.` }], 'Too many contacts in one import.');
    }
    const problem = this.check(input);
    if (typeof problem === 'string') {
      this.invalidCount++;
      if (this.invalid.length < this.deps.config.CAMPAIGN_CONTACTS_MAX_INVALID_LISTED) this.invalid.push({ ...where, detail: problem });
      return;
    }
    if (this.valid.has(problem.phoneNumber)) {
      this.repeated++;
      return;
    }
    this.valid.set(problem.phoneNumber, problem);
  }

  private check(input: ContactInput): NewContactValues | string {
    const parsed = parseDestination(input.phone_number);
    if (!parsed.ok) return input.phone_number === '' ? 'No phone_number.' : parsed.detail;
    if (parsed.destination.kind !== 'e164') return 'A campaign calls phone numbers in E.164, not SIP URIs.';
    const timezone = input.timezone ?? null;
    if (timezone !== null && !isKnownTimeZone(timezone)) return `"${timezone}" is not an IANA time zone such as "America/New_York".`;
    const context = input.initial_context ?? null;
    let initialContextJson: string | null = null;
    if (context !== null) {
      initialContextJson = JSON.stringify(context);
      const bytes = Buffer.byteLength(initialContextJson, 'utf8');
      if (bytes > this.deps.config.INITIAL_CONTEXT_MAX_BYTES) return `initial_context is ${bytes} bytes of JSON; the limit is ${this.deps.config.INITIAL_CONTEXT_MAX_BYTES}.`;
      const depth = jsonDepth(context);
      if (depth > this.deps.config.INITIAL_CONTEXT_MAX_DEPTH) return `initial_context is nested ${depth} levels deep; the limit is ${this.deps.config.INITIAL_CONTEXT_MAX_DEPTH}.`;
    }
    if (this.graph) {
      // Admission's variables stage, as each attempt will ask it (campaigns/scheduler.ts).
      const missing = variablesRefusal(this.graph, context);
      if (missing) return missing.message;
    }
    return { phoneNumber: parsed.destination.value, initialContextJson, timezone };
  }
}

async function openCampaign(deps: Deps, orgId: number | undefined, campaignId: number, request: ImportRequest): Promise<{ campaign: CampaignRow; graph: DefinitionGraph | undefined }> {
  const campaign = await findCampaign(deps, orgId, campaignId);
  // Without a key an ended campaign is refused at once; with one, the refusal waits until the key
  // is looked up (write()), so a retry of an import that succeeded gets its answer again.
  if (parseIdempotencyKey(request.idempotencyKey) === undefined && !OPEN_STATES.includes(campaign.state)) throw closed(campaign);
  // The agent's required variables, checked now so a contact missing one is reported, not dialed;
  // an agent not runnable now is checked again when each attempt is created.
  const graph = await admitTarget(deps, campaign.org_id, await campaignTarget(deps, campaign), campaign.mode).then(
    (resolved) => resolved.graph,
    () => undefined,
  );
  return { campaign, graph };
}

function closed(campaign: CampaignRow): DialtoneError {
  return new DialtoneError('campaign_state_conflict', `Campaign ${campaign.id} is ${campaign.state}; it takes no more contacts.`, { extra: { state: campaign.state } });
}

/** Imports a JSON array of contacts. */
export async function importContactList(deps: Deps, orgId: number, campaignId: number, items: readonly ContactInput[], request: ImportRequest): Promise<{ status: number; json: string; replayed: boolean }> {
  const { campaign, graph } = await openCampaign(deps, orgId, campaignId, request);
  const batch = new ContactBatch(deps, graph);
  // Checked in slices, yielding between them: each check costs tens of microseconds.
  for (let index = 0; index < items.length; index++) {
    if (index > 0 && index % deps.config.CSV_IMPORT_SLICE_LINES === 0) await nextTurn();
    batch.add({ index }, items[index] as ContactInput);
  }
  return write(deps, campaign, batch, request, () => requestFingerprint('POST', request.path, items));
}

/**
 * Imports a CSV of contacts: a header naming a `phone_number` column, optionally `timezone`; every
 * other column becomes an `initial_context` string value (empty cells are left out). The file is
 * received whole, then checked in slices that yield to the event loop (shared/csv-body.ts); a header
 * alone adds nothing. Every line counts toward CAMPAIGN_CONTACTS_MAX_PER_REQUEST, invalid and
 * repeated ones too, since each costs its check.
 * `orgId` undefined: the administration CLI.
 */
export async function importContactCsv(
  deps: Deps,
  orgId: number | undefined,
  campaignId: number,
  body: Readable,
  request: ImportRequest,
  yieldToLoop?: () => Promise<unknown>,
): Promise<{ status: number; json: string; replayed: boolean }> {
  const { campaign, graph } = await openCampaign(deps, orgId, campaignId, request);
  const batch = new ContactBatch(deps, graph);
  const hash = createHash('sha256').update(`POST ${request.path}\ntext/csv\n`);
  const records = readCsvBody(body, {
    maxBytes: deps.config.CAMPAIGN_CONTACTS_MAX_BYTES,
    limitName: 'CAMPAIGN_CONTACTS_MAX_BYTES',
    maxLineBytes: deps.config.CSV_IMPORT_MAX_LINE_BYTES,
    sliceLines: deps.config.CSV_IMPORT_SLICE_LINES,
    columnName: (cell) => cell.trim(),
    requiredColumn: 'phone_number',
    headerHint: ' (and optionally timezone; other columns become initial_context)',
    onChunk: (chunk) => hash.update(chunk),
    ...(yieldToLoop ? { yieldToLoop } : {}),
  });
  for await (const { line, record } of records) {
    const context: Record<string, string> = {};
    for (const [name, value] of Object.entries(record)) {
      if (name !== 'phone_number' && name !== 'timezone' && value !== undefined && value !== '') context[name] = value;
    }
    const timezone = record.timezone === undefined || record.timezone === '' ? null : record.timezone;
    batch.add({ line }, { phone_number: record.phone_number ?? '', initial_context: Object.keys(context).length > 0 ? context : null, timezone });
  }
  const fingerprint = hash.digest('hex');
  return write(deps, campaign, batch, request, () => fingerprint);
}

async function write(deps: Deps, campaign: CampaignRow, batch: ContactBatch, request: ImportRequest, fingerprint: () => string): Promise<{ status: number; json: string; replayed: boolean }> {
  const key = parseIdempotencyKey(request.idempotencyKey);
  let claim: Claim | undefined;
  if (key !== undefined) {
    const claimed = await claimIdempotencyKey(deps, campaign.org_id, { key, fingerprint: fingerprint() });
    if (claimed.kind === 'replay') return { status: claimed.status, json: claimed.body, replayed: true };
    claim = claimed.claim;
  }
  const contacts = [...batch.valid.values()];
  try {
    if (!OPEN_STATES.includes(campaign.state)) throw closed(campaign);
    const json = await deps.store.transaction('durable', async (trx) => {
      const now = deps.clock.now();
      // Ended while the import was checked (completed, or canceled): nothing is written.
      if (!(await bumpContactsVersion(trx, campaign.id, now))) {
        throw new DialtoneError('campaign_state_conflict', `Campaign ${campaign.id} ended while its contacts were imported; it takes no more.`);
      }
      // A slice at a time, yielding between slices: on SQLite each insert runs on the event loop,
      // and 10,000 contacts at once would hold it for the whole transaction.
      let added = 0;
      for (let start = 0; start < contacts.length; start += deps.config.CSV_IMPORT_SLICE_LINES) {
        if (start > 0) await nextTurn();
        added += await insertContacts(trx, campaign.id, contacts.slice(start, start + deps.config.CSV_IMPORT_SLICE_LINES), now);
      }
      const answer: ImportAnswer = { added, duplicates: batch.repeated + contacts.length - added, invalid: batch.invalid, invalid_count: batch.invalidCount };
      const text = JSON.stringify(answer);
      if (claim) await completeClaim(trx, claim, 200, text, null, now);
      return text;
    });
    forget(deps, campaign.id);
    if (campaign.state === 'running') deps.signals.campaigns();
    return { status: 200, json, replayed: false };
  } catch (error) {
    if (claim) await releaseClaim(deps.store, claim).catch((releaseError: unknown) => deps.logger.warn({ err: releaseError }, 'could not release an Idempotency-Key claim; it frees itself after IDEMPOTENCY_LOCK_MS'));
    throw error;
  }
}

export interface ContactView {
  id: number;
  phone_number: string;
  status: ContactStatus;
  timezone: string | null;
  attempts: { attempt: number; run_id: number; state: RunState }[];
  /** When a pending contact is next due; null otherwise. */
  next_attempt_at: string | null;
}

export async function listContacts(
  deps: Deps,
  orgId: number,
  campaignId: number,
  page: { status?: ContactStatus | undefined; after?: number | undefined; limit: number },
): Promise<{ data: ContactView[]; next_after: number | null }> {
  await findCampaign(deps, orgId, campaignId);
  const rows = await selectContactPage(deps.store, campaignId, { ...(page.status ? { status: page.status } : {}), ...(page.after !== undefined ? { afterId: page.after } : {}) }, page.limit + 1);
  const shown = rows.slice(0, page.limit);
  const attempts = await selectContactAttempts(deps.store, shown.map((r) => r.id));
  const data = shown.map((row) => ({
    id: row.id,
    phone_number: row.phone_number,
    status: row.status,
    timezone: row.timezone,
    attempts: attempts.filter((a) => a.contact_id === row.id).map((a) => ({ attempt: a.attempt, run_id: a.run_id, state: a.state })),
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
  }));
  return { data, next_after: rows.length > page.limit ? (data[data.length - 1]?.id ?? null) : null };
}
