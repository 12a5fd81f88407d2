// Request rate limits per API key and per organization, counted by rate-limiter-flexible: in Redis
// when REDIS_URL is set (every node shares the counts), in this process's memory otherwise.
//
// Each limit is a fixed window of RATE_LIMIT_WINDOW_SECONDS allowing rate × window requests. A
// client may spend a window's quota at once (its burst) and then waits for the next window. Fixed
// windows are what the RateLimit header fields describe exactly (quota `q` per window `w`,
// remaining `r`, reset `t`), so every number a client reads is the one it is held to.
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type * as Flexible from 'rate-limiter-flexible';
import type { Logger } from 'pino';

// The package's index loads every store it can count in (MongoDB, DynamoDB, MySQL, Prisma, Drizzle,
// Memcached, etcd...), about 1 MB of heap in every node: only its own files for the two used here
// are loaded (the index's classes: `instanceof RateLimiterRes` holds across both), the Redis one
// with REDIS_URL.
const require = createRequire(import.meta.url);
const RateLimiterMemory = require('rate-limiter-flexible/lib/RateLimiterMemory.js') as typeof Flexible.RateLimiterMemory;
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes.js') as typeof Flexible.RateLimiterRes;
type RateLimiterAbstract = Flexible.RateLimiterAbstract;
type RateLimiterRes = Flexible.RateLimiterRes;

export type PolicyName = 'key' | 'org';

export interface RateLimitSubject {
  keyId: number;
  orgId: number;
  /** Requests per second allowed; 0 means the limit is off. */
  keyRatePerSecond: number;
  orgRatePerSecond: number;
}

export interface PolicyState {
  name: PolicyName;
  /** Requests allowed per window. */
  quota: number;
  windowSeconds: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  policies: PolicyState[];
  /** The policies whose quota is spent. */
  refused: PolicyName[];
  /** When refused: seconds until every exhausted policy has a new window. */
  retryAfterSeconds: number;
}

export interface RateLimitsOptions {
  windowSeconds: number;
  redisUrl?: string | undefined;
  redisPrefix: string;
  logger: Logger;
}

/** Redis errors are logged at most once per this interval: a Redis outage must not flood the log. */
const REDIS_ERROR_LOG_INTERVAL_MS = 10_000;

export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();
  private readonly redis: Redis | undefined;
  private lastRedisErrorLoggedAt = 0;

  constructor(private readonly options: RateLimitsOptions) {
    if (options.redisUrl) {
      // No offline queue: while Redis is unreachable a count fails at once and the in-memory
      // insurance limiter answers, instead of requests waiting on a reconnect. Lazy: a process
      // that never serves the API (the CLI, a dispatcher-only node) never connects.
      // Required here, not imported: a process without REDIS_URL (every CLI command) never loads it.
      const { Redis: RedisClient } = require('ioredis') as typeof import('ioredis');
      this.redis = new RedisClient(options.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
      this.redis.on('error', (error: Error) => {
        const now = Date.now();
        if (now - this.lastRedisErrorLoggedAt < REDIS_ERROR_LOG_INTERVAL_MS) return;
        this.lastRedisErrorLoggedAt = now;
        options.logger.warn({ err: error }, 'rate-limit Redis unavailable: this node counts on its own until it is back');
      });
    }
  }

  async check(subject: RateLimitSubject): Promise<RateLimitDecision> {
    this.connect();
    const wanted: [PolicyName, number, number][] = [
      ['key', subject.keyRatePerSecond, subject.keyId],
      ['org', subject.orgRatePerSecond, subject.orgId],
    ];
    const results = await Promise.all(
      wanted
        .filter(([, rate]) => rate > 0)
        .map(async ([name, rate, id]) => {
          const quota = rate * this.options.windowSeconds;
          const outcome = await consume(this.limiter(name, quota), String(id));
          return { name, quota, ...outcome };
        }),
    );
    const policies = results.map(({ name, quota, res }) => ({
      name,
      quota,
      windowSeconds: this.options.windowSeconds,
      remaining: Math.max(0, res.remainingPoints),
      resetSeconds: Math.max(0, Math.ceil(res.msBeforeNext / 1000)),
    }));
    const refused = results.filter((r) => !r.allowed);
    return {
      allowed: refused.length === 0,
      policies,
      refused: refused.map((r) => r.name),
      retryAfterSeconds: Math.max(1, ...refused.map((r) => Math.ceil(r.res.msBeforeNext / 1000))),
    };
  }

  /**
   * Resolves once Redis is connected, or has failed once (this node then counts on its own until
   * it connects), or after `timeoutMs`: a node starting up should not count alone while its
   * connection is merely on its way.
   */
  async ready(timeoutMs = 5_000): Promise<void> {
    const redis = this.redis;
    if (!redis || redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      this.connect();
      const done = () => {
        clearTimeout(timer);
        redis.off('ready', done);
        redis.off('error', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      redis.once('ready', done);
      redis.once('error', done);
    });
  }

  async close(): Promise<void> {
    if (!this.redis || this.redis.status === 'wait' || this.redis.status === 'end') return;
    await this.redis.quit().catch(() => this.redis?.disconnect());
  }

  private connect(): void {
    // Failures surface through the 'error' event (logged above); ioredis keeps reconnecting.
    if (this.redis?.status === 'wait') this.redis.connect().catch(() => undefined);
  }

  /** One limiter per policy and quota (an organization may have its own rate). */
  private limiter(name: PolicyName, quota: number): RateLimiterAbstract {
    const id = `${name}:${quota}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      const shape = { points: quota, duration: this.options.windowSeconds, keyPrefix: `${this.options.redisPrefix}:${id}` };
      limiter = this.redis
        ? new (require('rate-limiter-flexible/lib/RateLimiterRedis.js') as typeof Flexible.RateLimiterRedis)({ ...shape, storeClient: this.redis, rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(shape) })
        : new RateLimiterMemory(shape);
      this.limiters.set(id, limiter);
    }
    return limiter;
  }
}

/** rate-limiter-flexible rejects with the counter's state when the quota is spent, and with an Error on a store failure. */
async function consume(limiter: RateLimiterAbstract, key: string): Promise<{ allowed: boolean; res: RateLimiterRes }> {
  try {
    return { allowed: true, res: await limiter.consume(key) };
  } catch (rejection: unknown) {
    if (rejection instanceof RateLimiterRes) return { allowed: false, res: rejection };
    throw rejection;
  }
}

/** `RateLimit-Policy` and `RateLimit` fields, in the syntax of draft-ietf-httpapi-ratelimit-headers-10. */
export function rateLimitHeaders(policies: PolicyState[]): { 'ratelimit-policy': string; ratelimit: string } | undefined {
  if (policies.length === 0) return undefined;
  return {
    'ratelimit-policy': policies.map((p) => `"${p.name}";q=${p.quota};w=${p.windowSeconds}`).join(', '),
    ratelimit: policies.map((p) => `"${p.name}";r=${p.remaining};t=${p.resetSeconds}`).join(', '),
  };
}
