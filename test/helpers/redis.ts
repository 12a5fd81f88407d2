// Redis for the tests that need it (shared rate limits): reachable at TEST_REDIS_URL, default
// redis://127.0.0.1:6379. Without it those tests are skipped with the reason, unless
// DIALTONE_TEST_REQUIRE_REDIS=1 (set by .ci/run), which turns the skip into a failure.
import { Redis } from 'ioredis';

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const REQUIRE_REDIS = process.env.DIALTONE_TEST_REQUIRE_REDIS === '1';

/** False when Redis answers; otherwise the reason to skip. */
export async function redisSkip(): Promise<string | false> {
  const client = new Redis(TEST_REDIS_URL, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  let reason: string | false = false;
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    reason = `Redis not reachable at ${TEST_REDIS_URL} (${(error as Error).message})`;
  } finally {
    client.disconnect();
  }
  if (reason && REQUIRE_REDIS) throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_REDIS=1 forbids skipping Redis tests`);
  if (reason) process.stderr.write(`# skipping Redis tests: ${reason}\n`);
  return reason;
}
