// The run lifecycle (docs/design.md, "Run lifecycle"). This table is the only place that says which
// state may follow which; everything that moves a run goes through `transitionRun`, which enforces
// it in the same SQL statement that changes the state.
//
//   queued ──► dialing ──► ringing ──► in_progress ──► completed
//     │           │           │             │
//     ├► canceled ├► failed   ├► busy       └► failed
//     ├► expired  └► rejected ├► no_answer
//     └► failed               ├► rejected
//                             └► canceled
//
//   dialing ──► queued: a stopping node's claim it never dialed, given back (never a dialed run)
//
// Providers do not always report every phase (an answer can arrive with no ringing before it, a
// busy signal can come straight after the dial), so later phases may also be reached directly
// from earlier live states. No state is ever reachable from a terminal one, and no live state
// from a later live one: a duplicate, late or out-of-order event simply matches no predecessor.
// The one step back, `dialing → queued`, is taken only by a node for runs whose dial request it
// never sent (no provider reports `queued`), with that guard in its statement.

/** Every state a run can be in: the store's column type and the API's enum derive from this list. */
export const RUN_STATES = ['queued', 'dialing', 'ringing', 'in_progress', 'completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const TERMINAL_STATES = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'] as const satisfies readonly RunState[];
export const LIVE_STATES = ['dialing', 'ringing', 'in_progress'] as const satisfies readonly RunState[];

export type TerminalState = (typeof TERMINAL_STATES)[number];
export type LiveState = (typeof LIVE_STATES)[number];

export const PREDECESSORS: Record<RunState, readonly RunState[]> = {
  // A stopping node gives back the runs it claimed and never sent a dial request for (lifecycle.ts's
  // requeueUndialed): the one way back, guarded there by no dial recorded.
  queued: ['dialing'],
  dialing: ['queued'],
  ringing: ['dialing'],
  in_progress: ['dialing', 'ringing'],
  completed: ['dialing', 'ringing', 'in_progress'],
  busy: ['dialing', 'ringing'],
  no_answer: ['dialing', 'ringing'],
  rejected: ['dialing', 'ringing'],
  failed: ['queued', 'dialing', 'ringing', 'in_progress'],
  canceled: ['queued', 'dialing', 'ringing'],
  expired: ['queued'],
};

export function isTerminal(state: RunState): state is TerminalState {
  return (TERMINAL_STATES as readonly RunState[]).includes(state);
}

export function canTransition(from: RunState, to: RunState): boolean {
  return PREDECESSORS[to].includes(from);
}
