// What a request reads before it writes (its API key, its agent and definition, its telephony
// route) changes rarely and is read on every call: each node keeps what it read for
// LOOKUP_CACHE_TTL_MS, so a creation costs one write instead of four reads and a write. The price
// is staleness, bounded and documented: a revoked key, an archived agent, a newly published
// version or a changed route takes effect on every node within LOOKUP_CACHE_TTL_MS. Concurrent
// requests for the same entry share one read. Entries are bounded (least recently used go first),
// so random keys cannot grow the cache without limit.
import { LRUCache } from 'lru-cache';

export interface CacheClock {
  now(): number;
}

const MAX_ENTRIES = 10_000;

export class LookupCache {
  private readonly entries: LRUCache<string, Promise<unknown>> | undefined;

  constructor(ttlMs: number, clock: CacheClock, maxEntries = MAX_ENTRIES) {
    // The clock is the service's, so tests move time with a fake clock instead of sleeping; asked
    // on every check (ttlResolution 0), since lru-cache would otherwise reuse a reading for 1 ms of real time.
    this.entries = ttlMs > 0 ? new LRUCache({ max: maxEntries, ttl: ttlMs, ttlResolution: 0, perf: { now: () => clock.now() } }) : undefined;
  }

  /** The value under `key` read within the TTL, or `load()`'s (a failed load is not kept). */
  get<T>(key: string, load: () => Promise<T>): Promise<T> {
    const entries = this.entries;
    if (!entries) return load();
    const known = entries.get(key) as Promise<T> | undefined;
    if (known) return known;
    const loading = load();
    entries.set(key, loading);
    loading.catch(() => {
      if (entries.get(key) === loading) entries.delete(key);
    });
    return loading;
  }
}

/** A cache that keeps nothing: every get reads. */
export const NO_CACHE = new LookupCache(0, { now: () => 0 });
