// The agent runtime's read of what to run (docs/design.md, "Agent runtime hand-off"), authorized by
// the per-run token it was handed with the answered call. A wrong, expired or missing token, and an
// unknown run, get the same 401: the token is the only thing that names a run here.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError } from '../../errors.js';
import { loadRunDefinition } from '../../runs/run-definition.js';
import { verifyRunToken } from '../../runtime/run-token.js';
import { problemResponses } from '../problem-schemas.js';
import { PathId } from '../schemas.js';

export const RuntimeRun = Type.Object({
  run_id: Type.Integer(),
  run_name: Type.String(),
  state: Type.String(),
  mode: Type.String(),
  workflow_uuid: Type.String({ format: 'uuid' }),
  definition_version: Type.Integer(),
  definition: Type.Object({}, { additionalProperties: true, description: 'The pinned definition graph: nodes, edges, variables' }),
  context: Type.Object({}, { additionalProperties: true, description: 'Variable defaults overlaid by the run\'s initial_context' }),
});

export function runtimeRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/runs/:id',
      {
        schema: {
          operationId: 'getRuntimeRun',
          summary: 'Get Run For The Agent Runtime',
          description: 'The pinned definition and template context of a run, for the agent runtime the answered call was handed to.',
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: Type.Object({ id: PathId('Workflow run id') }),
          response: { 200: RuntimeRun, ...problemResponses(['not_found', 'invalid_run_token']) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        const header = request.headers.authorization ?? '';
        const token = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
        const refuse = () => new DialtoneError('invalid_run_token', 'Send the run token handed over with the call as "Authorization: Bearer <token>".');
        if (!token || !/^[1-9][0-9]{0,14}$/.test(id) || !deps.config.DIALTONE_SECRET_KEY) throw refuse();
        if (!verifyRunToken(deps.cipher, Number(id), token, deps.clock.now())) throw refuse();
        const found = await loadRunDefinition(deps.store, Number(id));
        if (!found) throw refuse();
        return {
          run_id: found.run.id,
          run_name: found.run.name ?? '',
          state: found.run.state,
          mode: found.run.mode,
          workflow_uuid: found.workflowUuid,
          definition_version: found.version,
          definition: found.graph,
          context: found.context,
        };
      },
    );
  };
}
