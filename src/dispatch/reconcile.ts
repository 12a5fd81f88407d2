// Reconciliation: asking a provider whose calls outlive the node (Twilio) what became of a live
// run's call, and applying what it says through the run lifecycle. Callbacks get lost (the node
// that would take them was down, a proxy failed); without asking, such a run would end
// `provider_silent` although the call completed, `dispatch_interrupted` although it was placed, or
// hold a concurrency slot until its maximum duration.
//
// A sweep runs after each maintenance pass, one at a time per node, in the background. It takes
// the live runs of such providers that are overdue (the reaper leaves those to it: they are asked
// before they end) or had no news for RECONCILE_AFTER_MS, at most RECONCILE_MAX_READS_PER_ROUTE per
// route (capped per route by the store, so a route with many overdue runs never crowds the others
// out), asked one after the other per route at most RECONCILE_READS_PER_SECOND. Each question is
// claimed in the store first (`reconciled_at`), so two nodes never ask about the same run at once.
import type { Deps } from '../deps.js';
import { LIVE_STATES } from '../runs/states.js';
import { selectReconcileCandidates, selectRecordedCallIds, selectRunConfiguration, selectRunState, type ReconcileCandidate } from '../store/statements/run-reads.js';
import type { ProviderName } from '../store/schema/schema.js';
import type { CallReport, DecodedRoute, RemoteProvider } from '../telephony/provider.js';
import { applyMachineVerdict, remoteHandling } from './machine-verdicts.js';
import { applyReportedEvent, ringTimeoutOf } from './provider-events.js';

const BATCH = 500;

type Result = 'moved' | 'unchanged' | 'ended_live' | 'not_found' | 'error' | 'skipped';

export interface ReconcileHooks {
  /** A run reconciliation ended: put down its line if this node holds it. */
  reaped(runId: number): Promise<void>;
}

export function remoteProviders(deps: Pick<Deps, 'providers'>): RemoteProvider[] {
  return Object.values(deps.providers).filter((provider): provider is RemoteProvider => provider.callsOutliveNode);
}

export class Reconciler {
  private sweeping: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly deps: Deps,
    private readonly hooks: ReconcileHooks,
  ) {}

  /** Starts a sweep unless one is under way; returns it (already settled errors are logged). */
  sweep(): Promise<void> {
    if (this.stopping) return Promise.resolve();
    this.sweeping ??= this.sweepNow()
      .catch((error: unknown) => this.deps.logger.error({ err: error }, 'reconciliation sweep failed'))
      .finally(() => {
        this.sweeping = undefined;
      });
    return this.sweeping;
  }

  /** Ends the sweep under way early (between questions) and waits for it. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.sweeping;
  }

  private async sweepNow(): Promise<void> {
    const { deps } = this;
    const remote = remoteProviders(deps);
    if (remote.length === 0) return;
    const now = deps.clock.now();
    const candidates = await selectReconcileCandidates(deps.store, {
      providers: remote.map((p) => p.name),
      live: LIVE_STATES,
      now,
      quietSince: now - deps.config.RECONCILE_AFTER_MS,
      perRoute: deps.config.RECONCILE_MAX_READS_PER_ROUTE,
      limit: BATCH,
    });
    const perRoute = new Map<number, ReconcileCandidate[]>();
    for (const row of candidates) {
      const list = perRoute.get(row.telephony_configuration_id) ?? [];
      list.push(row);
      perRoute.set(row.telephony_configuration_id, list);
    }
    await Promise.all([...perRoute].map(([configurationId, rows]) => this.reconcileRoute(configurationId, rows)));
  }

  /** One route's questions, one after the other, spaced to RECONCILE_READS_PER_SECOND. */
  private async reconcileRoute(configurationId: number, rows: ReconcileCandidate[]): Promise<void> {
    const { deps } = this;
    const row = await selectRunConfiguration(deps.store, configurationId);
    const provider = deps.providers[row.provider];
    // A route of a provider this process does not run (removed from the registry) has nobody to ask.
    if (!provider?.callsOutliveNode) return;
    const decoded = deps.routes.decode(row);
    const spacingMs = 1000 / deps.config.RECONCILE_READS_PER_SECOND;
    let asked = 0;
    for (const run of rows) {
      if (this.stopping) return;
      if (asked > 0) await new Promise((resolve) => setTimeout(resolve, spacingMs));
      // A route that cannot be decoded cannot be asked: its overdue runs end as the reaper would end
      // them, the others wait (start-up logged the route's problems).
      const result: Result = decoded.ok ? await this.reconcileRun(run, decoded.route, provider) : (await this.endUnanswered(run, deps.clock.now())) ? 'error' : 'skipped';
      if (result === 'skipped') continue;
      asked++;
      deps.metrics.reconciliations.inc({ provider: row.provider, result });
    }
  }

  private async reconcileRun(run: ReconcileCandidate, route: DecodedRoute, provider: RemoteProvider): Promise<Result> {
    const { deps } = this;
    const now = deps.clock.now();
    if (!(await deps.lifecycle.claimReconciliation(run.id, run.reconciled_at, now))) return 'skipped';
    let report: CallReport | undefined;
    try {
      report = run.provider_call_id !== null ? await provider.fetchCall(route, run.provider_call_id) : await this.findCall(run, route, provider);
    } catch (error) {
      deps.logger.warn({ err: error, runId: run.id }, 'could not ask the provider about a live run');
      await this.endUnanswered(run, deps.clock.now());
      return 'error';
    }
    const at = deps.clock.now();
    if (!report) {
      await this.endUnanswered(run, at);
      return 'not_found';
    }
    let moved = false;
    if (run.provider_call_id === null) {
      // The node stopped between the provider taking the dial and recording it: the call is this run's now.
      moved = await deps.lifecycle.recordFoundCall(run.id, {
        providerCallId: report.providerCallId,
        sentAt: report.createdAt ?? run.claimed_at ?? at,
        deadlineAt: at + ringTimeoutOf(deps, route) + deps.config.REAPER_GRACE_MS,
      });
      if (!moved) return 'unchanged';
      deps.logger.info({ runId: run.id, providerCallId: report.providerCallId }, 'found the call of a run interrupted mid-dial');
    }
    const live = report.kind === null || report.kind === 'ringing' || report.kind === 'answered';
    // A verdict the call resource carries (its AsyncAmd callback lost): recorded before an end it
    // explains (a campaign settles its contact by it), acted on after an answer it follows.
    const verdict = report.verdict && { runId: run.id, providerCallId: report.providerCallId, ...report.verdict, at };
    if (verdict && !live) await applyMachineVerdict(deps, verdict, undefined);
    if (report.kind !== null) {
      const event = { runId: run.id, providerCallId: report.providerCallId, kind: report.kind, rawStatus: report.rawStatus, at };
      moved = (await applyReportedEvent(deps, event, route, { reconciled: true })) !== undefined || moved;
    }
    if (verdict && report.kind === 'answered') await applyMachineVerdict(deps, verdict, remoteHandling(deps, { runId: run.id, providerCallId: report.providerCallId, route }));
    const overdue = run.deadline_at !== null && run.deadline_at < now;
    if (live && overdue && !moved) return (await this.endLive(run, route, provider, report, at)) ? 'ended_live' : 'unchanged';
    return moved ? 'moved' : 'unchanged';
  }

  /** The call the provider placed for a run whose call id was never recorded. */
  private async findCall(run: ReconcileCandidate, route: DecodedRoute, provider: RemoteProvider): Promise<CallReport | undefined> {
    const placedAfter = run.claimed_at ?? 0;
    const excluding = new Set(await selectRecordedCallIds(this.deps.store, run.telephony_configuration_id, run.phone_number, placedAfter - 60_000));
    return provider.findCall(route, { to: run.phone_number, from: run.caller_id, placedAfter, excluding });
  }

  /**
   * The provider says the call is still up although the run is past its deadline (its ring timeout
   * or maximum duration, plus grace): Dialtone ends it as the node's own timers would have.
   */
  private async endLive(run: ReconcileCandidate, route: DecodedRoute, provider: RemoteProvider, report: CallReport, at: number): Promise<boolean> {
    const { deps } = this;
    const state = await selectRunState(deps.store, run.id);
    if (state === undefined || !(LIVE_STATES as readonly string[]).includes(state)) return false;
    const answered = state === 'in_progress';
    const applied = await deps.lifecycle.transition(run.id, answered ? 'completed' : 'no_answer', {
      at,
      reason: answered ? 'max_duration' : 'ring_timeout',
      rawProviderStatus: report.rawStatus,
      data: { reconciled: true },
      onlyFrom: state,
    });
    if (!applied) return false;
    await provider.hangUp({ runId: run.id, providerCallId: report.providerCallId, route }).catch((error: unknown) => deps.logger.warn({ err: error, runId: run.id }, 'hang-up failed'));
    await this.hooks.reaped(run.id);
    return true;
  }

  /**
   * Nothing to learn from the provider (it does not know the call, or could not be asked): an
   * overdue run ends as the reaper ends it; one still within its deadline waits for news.
   */
  private async endUnanswered(run: ReconcileCandidate, at: number): Promise<boolean> {
    if (run.deadline_at === null || run.deadline_at >= at) return false;
    const interrupted = run.state === 'dialing' && run.provider_call_id === null;
    const applied = await this.deps.lifecycle.transition(run.id, 'failed', {
      at,
      reason: interrupted ? 'dispatch_interrupted' : 'provider_silent',
      data: { reaped_from: run.state, reconciled: true },
      onlyFrom: run.state,
      onlyIfDeadlineBefore: at,
    });
    if (!applied) return false;
    this.deps.logger.warn({ runId: run.id, providerCallId: run.provider_call_id }, 'reaped a run its provider had no news of');
    await this.hooks.reaped(run.id);
    return true;
  }
}

/** Providers whose overdue runs reconciliation asks about before they end (the reaper leaves them). */
export function askFirstProviders(deps: Pick<Deps, 'providers'>): ProviderName[] {
  return remoteProviders(deps).map((p) => p.name);
}
