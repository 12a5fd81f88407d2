// A campaign's progress as its reads show it, counted at most once per CAMPAIGN_PROGRESS_CACHE_MS
// per node. Counting walks every contact and every attempt of the campaign (index-only, but a
// 100,000-contact campaign with retries is hundreds of thousands of index entries), and the
// readers that poll it (`campaign status --watch`, the console's Campaigns page, a customer's
// dashboard) ask every second, several at once: without this each of them would pay the count,
// and on SQLite the count holds the one thread every request needs. Concurrent reads share one
// count in flight. The four actions count afresh and leave their answer here for the next read.
//
// A count is kept with the campaign's row as the same read saw it, and served only while the
// campaign is still as that row shows it (same state, same last change): a read never pairs a
// campaign's new state with progress counted before it (a completed campaign with contacts still
// in progress, a canceled one without its canceled contacts). The reader shows the kept row, so
// state and progress always come from one read.
import type { Deps } from '../deps.js';
import type { CampaignRow } from '../store/schema/schema.js';
import type { Store } from '../store/engine/store.js';

/** What one read of a campaign saw: its row and its progress. */
export interface Counted<T> {
  row: CampaignRow;
  progress: T;
}

interface Entry<T> {
  countedAt: number;
  value: Promise<Counted<T>>;
}

/** Entries past their time are dropped when the map grows past this; live ones are few (campaigns read within the window). */
const PRUNE_ABOVE = 256;

const caches = new WeakMap<object, Map<number, Entry<unknown>>>();

function cacheOf<T>(store: Store): Map<number, Entry<T>> {
  let cache = caches.get(store);
  if (!cache) {
    cache = new Map();
    caches.set(store, cache);
  }
  return cache as Map<number, Entry<T>>;
}

type CacheDeps = Pick<Deps, 'store' | 'clock' | 'config'>;

/**
 * The campaign and its progress as counted within the last CAMPAIGN_PROGRESS_CACHE_MS while the
 * campaign was as `current` shows it, else counted now.
 */
export async function cachedProgress<T>(deps: CacheDeps, current: CampaignRow, count: () => Promise<Counted<T>>): Promise<Counted<T>> {
  const ttl = deps.config.CAMPAIGN_PROGRESS_CACHE_MS;
  if (ttl === 0) return count();
  const entry = cacheOf<T>(deps.store).get(current.id);
  if (entry && deps.clock.now() - entry.countedAt < ttl) {
    const counted = await entry.value.catch(() => undefined);
    if (counted && sameMoment(counted.row, current)) return counted;
  }
  return remember(deps, current.id, count());
}

/** The campaign has not moved between the two reads: the same state, changed last at the same time. */
function sameMoment(kept: CampaignRow, current: CampaignRow): boolean {
  return kept.state === current.state && kept.paused_reason === current.paused_reason && kept.updated_at === current.updated_at;
}

/** Keeps a progress just counted (by an action) for the reads that follow. */
export function remember<T>(deps: CacheDeps, campaignId: number, value: Promise<Counted<T>>): Promise<Counted<T>> {
  if (deps.config.CAMPAIGN_PROGRESS_CACHE_MS === 0) return value;
  const cache = cacheOf<T>(deps.store);
  const now = deps.clock.now();
  if (cache.size >= PRUNE_ABOVE) {
    for (const [id, old] of cache) if (now - old.countedAt >= deps.config.CAMPAIGN_PROGRESS_CACHE_MS) cache.delete(id);
  }
  const entry = { countedAt: now, value };
  cache.set(campaignId, entry);
  // A failed count is not kept: the next read counts again.
  value.catch(() => {
    if (cache.get(campaignId) === entry) cache.delete(campaignId);
  });
  return value;
}

/** Drops the kept progress after a write this node made to the campaign (an import): the next read counts. */
export function forget(deps: Pick<Deps, 'store'>, campaignId: number): void {
  caches.get(deps.store)?.delete(campaignId);
}
