// Whether a telephony configuration can place a call now, judged at request time so a caller
// hears "not ready" (422 telephony_not_ready) instead of a run that fails at dial time, and at
// start-up, where each active route that could not dial is logged with every problem. What a
// provider needs is its own to say (provider.ts: its schema, then its readiness); nothing here
// knows one provider from another.
import type { Logger } from 'pino';
import type { TelephonyConfigurationRow } from '../store/schema/schema.js';
import type { ServiceSettings } from './provider.js';
import type { RouteDecoder } from './routes.js';

/**
 * The start-up check: every active route is decoded and judged; each one that cannot dial is
 * logged with all its problems (requests through it are refused with 422 telephony_not_ready, and
 * runs already queued for it end failed at dial time with the same problems).
 */
export function refuseUnreadyRoutes(routes: RouteDecoder, rows: readonly TelephonyConfigurationRow[], service: ServiceSettings, logger: Logger): void {
  for (const row of rows) {
    const problems = routes.readiness(row, service);
    if (problems.length === 0) continue;
    logger.warn({ telephonyConfigurationId: row.id, provider: row.provider, problems }, 'telephony configuration refused: it cannot place calls until fixed');
  }
}
