// Builds the real application on a fresh database for one test (or one describe block).
import type { TestContext } from 'node:test';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { buildDeps, type Deps } from '../../src/deps.js';
import type { Clock } from '../../src/shared/clock.js';
import type { ProviderRegistry } from '../../src/telephony/registry.js';
import { migrateToLatest } from '../../src/store/schema/migrate.js';
import type { Store } from '../../src/store/engine/store.js';
import { createTestDatabase, openTestStore, type StoreKind } from './stores.js';

export const TEST_SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

export interface TestEnv {
  app: FastifyInstance;
  deps: Deps;
  close(): Promise<void>;
}

export interface TestEnvOptions {
  env?: Record<string, string>;
  clock?: Clock;
  /** Default: silent. */
  logger?: Logger;
  /** The providers known, in place of the built-in ones (a fake provider added). */
  registry?: ProviderRegistry;
  /** Replaces the store the app and dispatcher are given (e.g. FakeTime's `watch`); the test still owns the real one. */
  wrapStore?: (store: Store) => Store;
  /** An existing database's URL (a restored backup) instead of a fresh one; the test removes it. */
  database?: string;
}

export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: databaseUrl,
    DIALTONE_SECRET_KEY: TEST_SECRET_KEY,
    DIALTONE_FIRST_RUN_DEMO: 'false',
    // Most tests fire requests as fast as they can; the rate-limit tests turn the limits on.
    RATE_LIMIT_KEY_PER_SECOND: '0',
    RATE_LIMIT_ORG_PER_SECOND: '0',
    // Most tests change a key, an agent or a route and expect the next request to see it at once;
    // the lookup-cache tests turn the cache on and move a fake clock past its TTL.
    LOOKUP_CACHE_TTL_MS: '0',
    // Likewise a campaign's progress is read right after the ticks that change it; the
    // campaigns API test turns its cache on with a fake clock.
    CAMPAIGN_PROGRESS_CACHE_MS: '0',
    ...env,
  });
}

export async function createTestEnv(kind: StoreKind, options: TestEnvOptions = {}): Promise<TestEnv> {
  const database = options.database ? { url: options.database, drop: async () => undefined } : await createTestDatabase(kind);
  const store = openTestStore(database);
  const deps = buildDeps(testConfig(database.url, options.env), {
    store: options.wrapStore ? options.wrapStore(store) : store,
    logger: options.logger ?? pino({ level: 'silent' }),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.registry ? { registry: options.registry } : {}),
  });
  await migrateToLatest(store);
  const app = await buildApp(deps);
  await app.ready();
  return {
    app,
    deps,
    async close() {
      await app.close();
      await deps.rateLimits.close();
      await store.close();
      await database.drop();
    },
  };
}

/** A test environment closed when the test ends. */
export async function build(t: TestContext, kind: StoreKind, options: TestEnvOptions = {}): Promise<TestEnv> {
  const env = await createTestEnv(kind, options);
  t.after(() => env.close());
  return env;
}

export function problemOf(response: LightMyRequestResponse): { status: number; code: string; errors?: { pointer: string; detail: string }[]; [k: string]: unknown } {
  return response.json();
}

export interface PostOptions {
  key?: string | undefined;
  headers?: Record<string, string>;
  /** Sent as-is instead of JSON-encoding `body`. */
  raw?: string;
}

/** POSTs JSON with an API key, as a customer's backend would. */
export function postJson(app: FastifyInstance, url: string, body: unknown, options: PostOptions = {}) {
  return app.inject({
    method: 'POST',
    url,
    headers: {
      'content-type': 'application/json',
      ...(options.key !== undefined ? { 'x-api-key': options.key } : {}),
      ...options.headers,
    },
    payload: options.raw ?? JSON.stringify(body),
  });
}

export function getJson(app: FastifyInstance, url: string, key?: string) {
  return app.inject({ method: 'GET', url, headers: key ? { 'x-api-key': key } : {} });
}
