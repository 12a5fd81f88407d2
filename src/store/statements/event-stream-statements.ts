// The statements behind the event stream (stream/): its sources in one global order. Run events
// (run_events), recorded webhook delivery attempts (webhook_delivery_events, migration 011) and
// changes of campaigns' states (campaign_events, migration 012) draw their ids from one sequence,
// run_events' (an identity column on PostgreSQL, AUTOINCREMENT on SQLite: never reused), so an id
// is a position in all of them at once and a stream's cursor stays one integer. Each read merges
// them by id. The two journals are written by their changes' transactions (insertDeliveryEvent,
// insertCampaignEvent); run events by runs/, as always.
import { sql } from '../engine/kysely.js';
import type { Insertable, Kysely } from 'kysely';
import type { CampaignEventRow, CampaignEventsTable, Database, WebhookDeliveryEventRow, WebhookDeliveryEventsTable } from '../schema/schema.js';
import { explainQuery, notIndexed } from '../engine/query-plans.js';
import { decodeJson, queryable, type Connection } from '../engine/store.js';

export interface RunStreamRow {
  kind: 'run';
  id: number;
  org_id: number;
  run_id: number;
  run_name: string | null;
  /** The campaign the run is an attempt of; null for a direct run. */
  campaign_id: number | null;
  seq: number;
  type: string;
  at: number;
  data: Record<string, unknown>;
}

/** A recorded webhook delivery attempt, as journalled. */
export type DeliveryStreamRow = { kind: 'delivery' } & WebhookDeliveryEventRow;

/** A change of a campaign's state, as journalled. */
export type CampaignStreamRow = { kind: 'campaign' } & CampaignEventRow;

export type StreamEventRow = RunStreamRow | DeliveryStreamRow | CampaignStreamRow;

interface Range {
  afterId: number;
  upToId?: number | undefined;
  orgId?: number | undefined;
  limit: number;
}

function runEventsQuery(on: Connection, r: Range) {
  return queryable(on)
    .selectFrom('run_events as e')
    .innerJoin('workflow_runs as r', 'r.id', 'e.run_id')
    .select(['e.id', 'r.org_id', 'e.run_id', 'r.name as run_name', 'r.campaign_id', 'e.seq', 'e.type', 'e.at', 'e.data'])
    .where('e.id', '>', r.afterId)
    .$if(r.upToId !== undefined, (q) => q.where('e.id', '<=', r.upToId as number))
    // The organization filters the events of the id range, walked in id order; it must not pick the
    // runs' (org_id, …) index, from which SQLite would read the organization's whole history and
    // sort it for every read (query-plans.ts).
    .$if(r.orgId !== undefined, (q) => q.where(notIndexed('r.org_id'), '=', r.orgId as number))
    .orderBy('e.id')
    .limit(r.limit);
}

/** The plan of a read of an organization's run events in an id range, as text (a test checks it walks the events by id). */
export function explainRunEvents(on: Connection, orgId: number, afterId: number, upToId: number, limit: number): Promise<string> {
  return explainQuery(on, runEventsQuery(on, { orgId, afterId, upToId, limit }));
}

async function runEvents(on: Connection, r: Range): Promise<RunStreamRow[]> {
  const rows = await runEventsQuery(on, r).execute();
  return rows.map((row) => ({
    kind: 'run',
    ...row,
    id: Number(row.id),
    org_id: Number(row.org_id),
    run_id: Number(row.run_id),
    campaign_id: row.campaign_id === null ? null : Number(row.campaign_id),
    at: Number(row.at),
    data: decodeJson<Record<string, unknown>>(row.data),
  }));
}

async function deliveryEvents(on: Connection, r: Range): Promise<DeliveryStreamRow[]> {
  const rows = await queryable(on)
    .selectFrom('webhook_delivery_events')
    .selectAll()
    .where('id', '>', r.afterId)
    .$if(r.upToId !== undefined, (q) => q.where('id', '<=', r.upToId as number))
    .$if(r.orgId !== undefined, (q) => q.where('org_id', '=', r.orgId as number))
    .orderBy('id')
    .limit(r.limit)
    .execute();
  return rows.map((row) => ({
    kind: 'delivery',
    ...row,
    id: Number(row.id),
    org_id: Number(row.org_id),
    endpoint_id: Number(row.endpoint_id),
    delivery_id: Number(row.delivery_id),
    run_id: row.run_id === null ? null : Number(row.run_id),
    next_attempt_at: row.next_attempt_at === null ? null : Number(row.next_attempt_at),
    at: Number(row.at),
  }));
}

async function campaignEvents(on: Connection, r: Range): Promise<CampaignStreamRow[]> {
  const rows = await queryable(on)
    .selectFrom('campaign_events')
    .selectAll()
    .where('id', '>', r.afterId)
    .$if(r.upToId !== undefined, (q) => q.where('id', '<=', r.upToId as number))
    .$if(r.orgId !== undefined, (q) => q.where('org_id', '=', r.orgId as number))
    .orderBy('id')
    .limit(r.limit)
    .execute();
  return rows.map((row) => ({ kind: 'campaign', ...row, id: Number(row.id), org_id: Number(row.org_id), campaign_id: Number(row.campaign_id), at: Number(row.at) }));
}

/**
 * Every source in id order, at most `limit`. A source that filled its page may have more past its
 * last id, so the merge stops there: every row up to the last one returned is in the answer.
 */
async function merged(on: Connection, r: Range): Promise<StreamEventRow[]> {
  const pages: StreamEventRow[][] = await Promise.all([runEvents(on, r), deliveryEvents(on, r), campaignEvents(on, r)]);
  const cut = Math.min(...pages.map((page) => (page.length === r.limit ? (page.at(-1)?.id ?? Infinity) : Infinity)));
  const rows = pages.flat().filter((row) => row.id <= cut).sort((a, b) => a.id - b.id);
  return rows.slice(0, r.limit);
}

/** Every organization's events after `afterId`, in id order (one node reads them for all its streams). */
export function selectEventsAfter(on: Connection, afterId: number, limit: number): Promise<StreamEventRow[]> {
  return merged(on, { afterId, limit });
}

/**
 * One organization's events with afterId < id <= upToId, in id order (a resuming stream's backlog).
 * Delivery and campaign events are read by their (org_id, id) indexes; run events have no organization column
 * (adding one would widen every run transition's write), so their part scans every
 * organization's events in the range and keeps this one's.
 */
export function selectOrganizationEventsBetween(on: Connection, orgId: number, afterId: number, upToId: number, limit: number): Promise<StreamEventRow[]> {
  return merged(on, { afterId, upToId, orgId, limit });
}

/** The tables whose ids come from run_events' sequence. */
const SOURCES = ['run_events', 'webhook_delivery_events', 'campaign_events'] as const;

/** The highest event id written so far in any source (0 when none). */
export async function selectLastEventId(on: Connection): Promise<number> {
  const lasts = await Promise.all(SOURCES.map((table) => queryable(on).selectFrom(table).select((eb) => eb.fn.max('id').as('last')).executeTakeFirst()));
  return Math.max(0, ...lasts.map((row) => Number(row?.last ?? 0)));
}

/** The ids and times of the events above `afterId`, in id order: what a feed looks at when it starts. */
export async function selectEventTimesAfter(on: Connection, afterId: number): Promise<{ id: number; at: number }[]> {
  const pages = await Promise.all(SOURCES.map((table) => queryable(on).selectFrom(table).select(['id', 'at']).where('id', '>', afterId).execute()));
  return pages
    .flat()
    .map((r) => ({ id: Number(r.id), at: Number(r.at) }))
    .sort((a, b) => a.id - b.id);
}

/**
 * The id of a journal row about to be written on SQLite: the next one of run_events'
 * sqlite_sequence row, which is moved on to it, so the next run event is numbered after it
 * (AUTOINCREMENT takes the larger of that row and the table's largest id). Exact because SQLite
 * writes one transaction at a time. On PostgreSQL the journal's id column defaults to run_events'
 * sequence (migrations/columns.ts), so there is nothing to do: undefined.
 */
async function drawJournalId(on: Connection, trx: Kysely<Database>): Promise<number | undefined> {
  if (on.dialect === 'postgres') return undefined;
  const next = await sql<{ id: number }>`
    select max(
      coalesce((select seq from sqlite_sequence where name = 'run_events'), 0),
      coalesce((select max(id) from run_events), 0),
      coalesce((select max(id) from webhook_delivery_events), 0),
      coalesce((select max(id) from campaign_events), 0)
    ) + 1 as id`.execute(trx);
  const id = Number(next.rows[0]?.id);
  const moved = await sql`update sqlite_sequence set seq = ${id} where name = 'run_events'`.execute(trx);
  if (Number(moved.numAffectedRows ?? 0) === 0) await sql`insert into sqlite_sequence (name, seq) values ('run_events', ${id})`.execute(trx);
  return id;
}

export type NewDeliveryEvent = Omit<Insertable<WebhookDeliveryEventsTable>, 'id'>;

/** Journals a recorded attempt for the stream, in the attempt's transaction, with an id from run_events' sequence. */
export async function insertDeliveryEvent(on: Connection, event: NewDeliveryEvent): Promise<void> {
  const trx = queryable(on);
  const id = await drawJournalId(on, trx);
  await trx
    .insertInto('webhook_delivery_events')
    .values(id === undefined ? event : { ...event, id })
    .execute();
}

export type NewCampaignEvent = Omit<Insertable<CampaignEventsTable>, 'id'>;

/** Journals a change of a campaign's state for the stream, in the change's transaction, with an id from run_events' sequence. */
export async function insertCampaignEvent(on: Connection, event: NewCampaignEvent): Promise<void> {
  const trx = queryable(on);
  const id = await drawJournalId(on, trx);
  await trx
    .insertInto('campaign_events')
    .values(id === undefined ? event : { ...event, id })
    .execute();
}
