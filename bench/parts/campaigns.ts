// The `campaigns` part: a contact list imported over HTTP, then a paced campaign run to its end
// by one node: the pace it held and the node's memory.
import { performance } from 'node:perf_hooks';
import type { StoreKind } from '../../test/helpers/stores.js';
import { CAMPAIGN_CALLS, CAMPAIGN_CONTACTS, CAMPAIGN_RATE, INSTANT_SIMULATOR } from '../knobs.js';
import { round } from '../load.js';
import { memoryOf } from '../machine.js';
import { setUp, startBenchService } from '../services.js';

/** CSV of `count` distinct contacts starting at `first`, with a column that becomes initial_context. */
function contactsCsv(first: number, count: number): string {
  return `phone_number,name\n${Array.from({ length: count }, (_, i) => `+1415${String(2_000_000 + first + i)},Contact ${first + i}`).join('\n')}\n`;
}

/** Busiest one-second window of sorted instants (ms): how many fall within any second. */
function busiestSecond(sorted: readonly number[]): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while ((sorted[end] as number) - (sorted[start] as number) >= 1000) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

/**
 * Campaigns (issue 15): importing CAMPAIGN_CONTACTS contacts over HTTP (10,000 a request, the
 * documented maximum), then a campaign of CAMPAIGN_CALLS contacts at CAMPAIGN_RATE calls a second
 * on an unpaced route, run to its end by one node (API, dispatcher and campaign scheduler) with the
 * instant simulator: the pace it held (from each run's dial time), and the node's peak RSS across
 * both (attempts are created lazily, so memory should not grow with the list).
 */
export async function campaignBench(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] campaigns: importing ${CAMPAIGN_CONTACTS} contacts, then ${CAMPAIGN_CALLS} calls at ${CAMPAIGN_RATE} a second\n`);
  const setup = await setUp(kind);
  // A batch and tick that let the campaign's own calls_per_second be the limit being measured.
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'all', CAMPAIGN_BATCH_SIZE: '10000', CAMPAIGN_TICK_INTERVAL_MS: '100', DISPATCH_BATCH_SIZE: '1000' });
  const api = (path: string, body: string, contentType = 'application/json') =>
    fetch(`${service.url}/api/v1/public/campaigns${path}`, { method: 'POST', headers: { 'content-type': contentType, 'x-api-key': setup.fixture.apiKey }, body });
  const create = async (name: string, extra: Record<string, unknown>) => {
    const response = await api('', JSON.stringify({ name, agent_uuid: setup.fixture.agentUuid, mode: 'published', telephony_configuration_id: setup.routeId, ...extra }));
    if (response.status !== 201) throw new Error(`creating a campaign answered ${response.status}: ${await response.text()}`);
    return ((await response.json()) as { id: number }).id;
  };
  try {
    const atStart = memoryOf(service.child.pid);
    const listId = await create('Import', {});
    const importStarted = performance.now();
    let added = 0;
    for (let first = 0; first < CAMPAIGN_CONTACTS; first += 10_000) {
      const response = await api(`/${listId}/contacts`, contactsCsv(first, Math.min(10_000, CAMPAIGN_CONTACTS - first)), 'text/csv');
      if (response.status !== 200) throw new Error(`importing contacts answered ${response.status}: ${await response.text()}`);
      added += ((await response.json()) as { added: number }).added;
    }
    const importSeconds = (performance.now() - importStarted) / 1000;

    const pacedId = await create('Paced', { calls_per_second: CAMPAIGN_RATE, max_concurrent_calls: 10_000 });
    for (let first = 0; first < CAMPAIGN_CALLS; first += 10_000) {
      const response = await api(`/${pacedId}/contacts`, contactsCsv(CAMPAIGN_CONTACTS + first, Math.min(10_000, CAMPAIGN_CALLS - first)), 'text/csv');
      if (response.status !== 200) throw new Error(`importing contacts answered ${response.status}: ${await response.text()}`);
    }
    const started = await api(`/${pacedId}/start`, '{}');
    if (started.status !== 200) throw new Error(`starting the campaign answered ${started.status}: ${await started.text()}`);
    const deadline = Date.now() + (CAMPAIGN_CALLS / CAMPAIGN_RATE) * 1000 * 3 + 60_000;
    let state = 'running';
    let peakDuringRun = 0;
    while (state !== 'completed') {
      if (Date.now() > deadline) throw new Error(`the campaign is still ${state} after ${deadline} ms`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const mem = memoryOf(service.child.pid);
      if (typeof mem !== 'string') peakDuringRun = Math.max(peakDuringRun, mem.rss_mb);
      const read = await fetch(`${service.url}/api/v1/public/campaigns/${pacedId}`, { headers: { 'x-api-key': setup.fixture.apiKey } });
      state = ((await read.json()) as { state: string }).state;
    }
    const rows = await setup.store.db.selectFrom('workflow_runs').select(['dial_sent_at', 'provider_call_id']).where('campaign_id', '=', pacedId).execute();
    const dials = rows.flatMap((r) => (r.dial_sent_at === null ? [] : [Number(r.dial_sent_at)])).sort((a, b) => a - b);
    const spanSeconds = dials.length > 1 ? ((dials.at(-1) as number) - (dials[0] as number)) / 1000 : NaN;
    return {
      import: { contacts: CAMPAIGN_CONTACTS, added, requests: Math.ceil(CAMPAIGN_CONTACTS / 10_000), seconds: round(importSeconds, 2) },
      pace: {
        calls_per_second: CAMPAIGN_RATE,
        runs: rows.length,
        dialed: dials.length,
        distinct_provider_calls: new Set(rows.map((r) => r.provider_call_id).filter((id) => id !== null)).size,
        seconds_first_to_last_dial: round(spanSeconds, 1),
        average_dials_per_second: round((dials.length - 1) / spanSeconds, 1),
        busiest_one_second_window: busiestSecond(dials),
      },
      memory: { at_start: atStart, peak_rss_mb_sampled_during_run: peakDuringRun, at_end: memoryOf(service.child.pid) },
    };
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
    await setup.drop();
  }
}
