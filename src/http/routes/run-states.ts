// The run lifecycle's vocabulary, served so that clients (the console first) learn it from the one
// source, runs/states.ts, instead of copying it: every state in lifecycle order, and whether it is
// terminal or live. It is the same for every organization; the key is asked for like everywhere else.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { LIVE_STATES, RUN_STATES, TERMINAL_STATES, type RunState } from '../../runs/states.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { RunStateRef, withRateLimitHeaders } from '../schemas.js';

const RunStateInfo = Type.Object(
  {
    state: RunStateRef(),
    terminal: Type.Boolean({ description: 'The run has ended: no state follows this one' }),
    live: Type.Boolean({ description: 'A call is under way on the route (dialing, ringing or in progress)' }),
  },
  { additionalProperties: false },
);

/** The answer is fixed for the process's life: built once. */
const ANSWER = {
  data: RUN_STATES.map((state) => ({
    state,
    terminal: (TERMINAL_STATES as readonly RunState[]).includes(state),
    live: (LIVE_STATES as readonly RunState[]).includes(state),
  })),
};

export function runStateRoutes(): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/run-states',
      {
        schema: {
          operationId: 'listRunStates',
          summary: 'List Run States',
          description: 'Every state a workflow run can be in, in lifecycle order (queued first, then the live states, then the terminal ones), each saying whether it is terminal and whether it is live.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          response: { 200: withRateLimitHeaders(Type.Object({ data: Type.Array(RunStateInfo) }, { additionalProperties: false })), ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited']) },
        },
      },
      async () => ANSWER,
    );
  };
}
