// The definition graph: its shape, its validation (every problem listed, with a JSON Pointer),
// and the helpers that read it. docs/design.md, "Domain" is the contract.
import { randomUUID } from 'node:crypto';
import type { FieldError } from '../errors.js';
import { resultSchemaProblems } from './result-schema.js';
import { templateProblems, type TemplateContext } from './templates.js';
import { answeringMachineProblems, type AnsweringMachine } from './answering-machine.js';

export type NodeType = 'api_trigger' | 'start' | 'agent' | 'end';
const NODE_TYPES: readonly NodeType[] = ['api_trigger', 'start', 'agent', 'end'];

export interface DefinitionNode {
  id: string;
  type: NodeType;
  data: Record<string, unknown>;
}
export interface DefinitionEdge {
  source: string;
  target: string;
  label?: string;
}
export interface VariableSpec {
  required?: boolean;
  default?: unknown;
  description?: string;
}
export interface DefinitionGraph {
  nodes: DefinitionNode[];
  edges: DefinitionEdge[];
  variables?: Record<string, VariableSpec>;
  /** Answering-machine detection and what to do on a machine (answering-machine.ts); absent: none. */
  answering_machine?: AnsweringMachine;
  /** The JSON Schema the agent runtime's result must satisfy (result-schema.ts); none: any object. */
  result_schema?: Record<string, unknown>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TEXT_FIELDS: Record<NodeType, { required: string[]; optional: string[] }> = {
  api_trigger: { required: [], optional: [] },
  start: { required: [], optional: ['greeting', 'prompt'] },
  agent: { required: ['prompt'], optional: [] },
  end: { required: [], optional: ['message'] },
};

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export interface ValidateOptions {
  /** Allow api_trigger nodes without a trigger_uuid (one is minted before saving). */
  allowMissingTriggerUuids?: boolean;
}

/** Validates an untrusted value as a definition graph. Returns every problem found, or the graph. */
export function validateDefinition(
  input: unknown,
  options: ValidateOptions = {},
): { ok: true; graph: DefinitionGraph } | { ok: false; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const add = (pointer: string, detail: string) => errors.push({ pointer, detail });

  if (!isObject(input)) return { ok: false, errors: [{ pointer: '', detail: 'A definition is a JSON object.' }] };
  for (const key of Object.keys(input)) {
    if (!['nodes', 'edges', 'variables', 'answering_machine', 'result_schema'].includes(key)) add(`/${key}`, `Unknown field "${key}".`);
  }
  const nodes = Array.isArray(input.nodes) ? input.nodes : (add('/nodes', 'Must be an array of nodes.'), []);
  const edges =
    input.edges === undefined ? [] : Array.isArray(input.edges) ? input.edges : (add('/edges', 'Must be an array of edges.'), []);

  const ids = new Set<string>();
  const triggerUuids = new Set<string>();
  let starts = 0;
  nodes.forEach((node: unknown, i: number) => {
    const at = `/nodes/${i}`;
    if (!isObject(node)) return add(at, 'A node is an object with "id", "type" and "data".');
    if (typeof node.id !== 'string' || node.id.length === 0) add(`${at}/id`, 'Must be a non-empty string.');
    else if (ids.has(node.id)) add(`${at}/id`, `Duplicate node id "${node.id}".`);
    else ids.add(node.id);
    const type = node.type;
    if (typeof type !== 'string' || !NODE_TYPES.includes(type as NodeType)) {
      return add(`${at}/type`, `Must be one of ${NODE_TYPES.join(', ')}.`);
    }
    const data = node.data === undefined ? {} : node.data;
    if (!isObject(data)) return add(`${at}/data`, 'Must be an object.');
    if (type === 'start') starts++;
    if (type === 'api_trigger') {
      const uuid = data.trigger_uuid;
      if (uuid === undefined) {
        if (!options.allowMissingTriggerUuids) add(`${at}/data/trigger_uuid`, 'Required: the agent UUID of this trigger.');
      } else if (typeof uuid !== 'string' || !isUuid(uuid)) {
        add(`${at}/data/trigger_uuid`, 'Must be a UUID.');
      } else if (triggerUuids.has(uuid.toLowerCase())) {
        add(`${at}/data/trigger_uuid`, `Duplicate trigger UUID ${uuid}.`);
      } else triggerUuids.add(uuid.toLowerCase());
      if (data.enabled !== undefined && typeof data.enabled !== 'boolean') add(`${at}/data/enabled`, 'Must be true or false.');
    }
    const fields = TEXT_FIELDS[type as NodeType];
    for (const field of fields.required) {
      if (data[field] === undefined) add(`${at}/data/${field}`, `Required for a ${type} node.`);
    }
    for (const field of [...fields.required, ...fields.optional]) {
      const value = data[field];
      if (value === undefined) continue;
      if (typeof value !== 'string') add(`${at}/data/${field}`, 'Must be a string.');
      else for (const problem of templateProblems(value)) add(`${at}/data/${field}`, problem);
    }
  });
  if (starts !== 1) add('/nodes', `A definition has exactly one start node (found ${starts}).`);

  edges.forEach((edge: unknown, i: number) => {
    const at = `/edges/${i}`;
    if (!isObject(edge)) return add(at, 'An edge is an object with "source" and "target".');
    for (const end of ['source', 'target'] as const) {
      const ref = edge[end];
      if (typeof ref !== 'string') add(`${at}/${end}`, 'Must be a node id.');
      else if (!ids.has(ref)) add(`${at}/${end}`, `No node has id "${ref}".`);
    }
    if (edge.label !== undefined && typeof edge.label !== 'string') add(`${at}/label`, 'Must be a string.');
  });

  if (input.variables !== undefined) {
    if (!isObject(input.variables)) add('/variables', 'Must be an object of variable specifications.');
    else {
      for (const [name, spec] of Object.entries(input.variables)) {
        const at = `/variables/${name}`;
        if (!VARIABLE_NAME.test(name)) add(at, 'A variable name is letters, digits and _, not starting with a digit.');
        if (!isObject(spec)) {
          add(at, 'Must be an object ({ "required"?, "default"?, "description"? }).');
          continue;
        }
        if (spec.required !== undefined && typeof spec.required !== 'boolean') add(`${at}/required`, 'Must be true or false.');
        if (spec.description !== undefined && typeof spec.description !== 'string') add(`${at}/description`, 'Must be a string.');
        for (const key of Object.keys(spec)) {
          if (!['required', 'default', 'description'].includes(key)) add(`${at}/${key}`, `Unknown field "${key}".`);
        }
      }
    }
  }

  if (input.answering_machine !== undefined) errors.push(...answeringMachineProblems(input.answering_machine, '/answering_machine'));
  if (input.result_schema !== undefined) errors.push(...resultSchemaProblems(input.result_schema));

  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, graph: input as unknown as DefinitionGraph };
}

/**
 * Gives every api_trigger node without a trigger_uuid one: the UUID its node id had in `inherited`
 * (the workflow's previous version), else a fresh one. A trigger's UUID is the agent UUID customers
 * embed, so saving a definition that omits it must not change it. An inherited UUID that another
 * node of this graph now names explicitly stays with that node, and the node that omitted it gets a
 * fresh one (a UUID appears once per graph). Returns a new graph.
 */
export function mintTriggerUuids(graph: DefinitionGraph, inherited: ReadonlyMap<string, string> = new Map()): DefinitionGraph {
  const explicit = new Set(triggersOf(graph).map((t) => t.triggerUuid));
  return {
    ...graph,
    nodes: graph.nodes.map((node) => {
      if (node.type !== 'api_trigger' || node.data.trigger_uuid !== undefined) return node;
      const previous = inherited.get(node.id);
      const uuid = previous !== undefined && !explicit.has(previous) ? previous : randomUUID();
      return { ...node, data: { ...node.data, trigger_uuid: uuid } };
    }),
  };
}

export interface TriggerNode {
  nodeId: string;
  triggerUuid: string;
  enabled: boolean;
}

export function triggersOf(graph: DefinitionGraph): TriggerNode[] {
  return graph.nodes
    .filter((n) => n.type === 'api_trigger' && typeof n.data.trigger_uuid === 'string')
    .map((n) => ({
      nodeId: n.id,
      triggerUuid: String(n.data.trigger_uuid).toLowerCase(),
      enabled: n.data.enabled !== false,
    }));
}

/** The definition's variable defaults overlaid by the caller's initial_context. */
export function templateContext(graph: DefinitionGraph, initialContext: TemplateContext | null): TemplateContext {
  const context: TemplateContext = {};
  for (const [name, spec] of Object.entries(graph.variables ?? {})) {
    if (spec.default !== undefined) context[name] = spec.default;
  }
  return { ...context, ...(initialContext ?? {}) };
}

/** Required variables that neither a default nor the initial_context provides (null counts as missing). */
export function missingRequiredVariables(graph: DefinitionGraph, context: TemplateContext): string[] {
  return Object.entries(graph.variables ?? {})
    .filter(([name, spec]) => spec.required === true && (context[name] === undefined || context[name] === null))
    .map(([name]) => name);
}

export function startNode(graph: DefinitionGraph): DefinitionNode | undefined {
  return graph.nodes.find((n) => n.type === 'start');
}
