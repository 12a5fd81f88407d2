import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError } from '../../errors.js';
import { getRun } from '../../runs/read-run.js';
import { authOf } from '../authenticate.js';
import { problemResponses, WorkflowRun } from '../schemas.js';

/** Path ids that are not positive integers name no run: 404, like any unknown id. */
export function parseRunId(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new DialtoneError('workflow_run_not_found', `No workflow run ${text}.`);
  return Number(text);
}

export function workflowRunRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/workflow-runs/:id',
      {
        schema: {
          operationId: 'getWorkflowRun',
          summary: 'Get Workflow Run',
          tags: ['Workflow runs'],
          security: [{ ApiKey: [] }],
          params: Type.Object({ id: Type.String({ description: 'Workflow run id' }) }),
          response: { 200: WorkflowRun, ...problemResponses([401, 404, 429, 503]) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        return getRun(deps.store, authOf(request).orgId, parseRunId(id));
      },
    );
  };
}
