// Cancel: a queued run is canceled on the spot and never dialed (the claim only takes `queued`
// runs). A live run is marked; the node holding its call ends it (at once when that is this node,
// else on that node's next tick): canceled before the answer, hung up (completed) after it.
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import { getRun, type RunView } from './read-run.js';
import { isTerminal } from './states.js';

export async function cancelRun(deps: Deps, orgId: number | undefined, runId: number): Promise<RunView> {
  const run = await getRun(deps.store, orgId, runId);
  if (isTerminal(run.state)) throw new DialtoneError('run_already_ended', `Run ${run.name} already ended (${run.state}).`);
  const now = deps.clock.now();
  if (run.state === 'queued') {
    const applied = await deps.lifecycle.transition(runId, 'canceled', { at: now, reason: 'canceled_by_request', requestedAt: now, onlyFrom: 'queued', durable: true });
    if (applied) return getRun(deps.store, orgId, runId);
    // Claimed in the meantime: cancel it as a live call.
  }
  if (!(await deps.lifecycle.requestCancel(runId, now))) {
    const current = await getRun(deps.store, orgId, runId);
    // Not live and never marked: the call ended on its own between our read and our write.
    if (isTerminal(current.state) && current.cancel_requested_at === null) {
      throw new DialtoneError('run_already_ended', `Run ${current.name} already ended (${current.state}).`);
    }
  }
  await deps.signals.cancel(runId);
  return getRun(deps.store, orgId, runId);
}
