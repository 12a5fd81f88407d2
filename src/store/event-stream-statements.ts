// The statements behind the event stream (stream/): run events in their global order, the
// run_events id (an identity column on PostgreSQL, AUTOINCREMENT on SQLite: never reused), with
// the few fields of their run that a subscriber needs.
import type { Store } from './store.js';
import { decodeJson } from './store.js';

export interface StreamEventRow {
  id: number;
  org_id: number;
  run_id: number;
  run_name: string | null;
  seq: number;
  type: string;
  at: number;
  data: Record<string, unknown>;
}

function eventQuery(store: Store, afterId: number, limit: number) {
  return store.db
    .selectFrom('run_events as e')
    .innerJoin('workflow_runs as r', 'r.id', 'e.run_id')
    .select(['e.id', 'r.org_id', 'e.run_id', 'r.name as run_name', 'e.seq', 'e.type', 'e.at', 'e.data'])
    .where('e.id', '>', afterId)
    .orderBy('e.id')
    .limit(limit);
}

const decode = (rows: (Omit<StreamEventRow, 'data'> & { data: unknown })[]): StreamEventRow[] =>
  rows.map((r) => ({ ...r, id: Number(r.id), data: decodeJson<Record<string, unknown>>(r.data) }));

/** Every organization's events after `afterId`, in id order (one node reads them for all its streams). */
export async function selectEventsAfter(store: Store, afterId: number, limit: number): Promise<StreamEventRow[]> {
  return decode(await eventQuery(store, afterId, limit).execute());
}

/** One organization's events with afterId < id <= upToId, in id order (a resuming stream's backlog). */
export async function selectOrganizationEventsBetween(store: Store, orgId: number, afterId: number, upToId: number, limit: number): Promise<StreamEventRow[]> {
  return decode(await eventQuery(store, afterId, limit).where('e.id', '<=', upToId).where('r.org_id', '=', orgId).execute());
}

/** The highest event id written so far (0 when none). */
export async function selectLastEventId(store: Store): Promise<number> {
  const row = await store.db.selectFrom('run_events').select((eb) => eb.fn.max('id').as('last')).executeTakeFirst();
  return Number(row?.last ?? 0);
}
