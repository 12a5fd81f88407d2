import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  isUuid,
  mintTriggerUuids,
  missingRequiredVariables,
  templateContext,
  triggersOf,
  validateDefinition,
  type DefinitionGraph,
} from '../src/workflows/definition.js';
import { placeholders, renderTemplate, templateProblems } from '../src/workflows/templates.js';

const TRIGGER = '0b6f1c3e-8a43-4a43-9c3c-1d7f0a2b3c4d';

function validGraph(): DefinitionGraph {
  return {
    nodes: [
      { id: 'trigger', type: 'api_trigger', data: { trigger_uuid: TRIGGER, enabled: true } },
      { id: 'start', type: 'start', data: { greeting: 'Hello {{name | there}}', prompt: 'Confirm {{appointment.time}}.' } },
      { id: 'agent', type: 'agent', data: { prompt: 'Answer questions about {{topic}}.' } },
      { id: 'end', type: 'end', data: { message: 'Goodbye {{name}}' } },
    ],
    edges: [
      { source: 'trigger', target: 'start' },
      { source: 'start', target: 'agent', label: 'questions' },
      { source: 'agent', target: 'end' },
    ],
    variables: {
      name: { description: 'Who we call' },
      topic: { required: true, default: 'billing' },
      appointment: { required: true },
    },
  };
}

function problemsOf(input: unknown): { pointer: string; detail: string }[] {
  const result = validateDefinition(input);
  assert.equal(result.ok, false, 'the definition is refused');
  return result.ok ? [] : result.errors;
}

describe('validateDefinition', () => {
  it('accepts a valid graph and returns it', () => {
    const graph = validGraph();
    const result = validateDefinition(graph);
    assert.equal(result.ok, true, JSON.stringify(result));
    assert.deepEqual(result.ok && result.graph, graph);
  });

  it('accepts a node without data and a graph without edges or variables', () => {
    const result = validateDefinition({ nodes: [{ id: 'start', type: 'start' }] });
    assert.equal(result.ok, true, JSON.stringify(result));
  });

  it('lists every problem of an invalid graph at once, each at its JSON Pointer', () => {
    const problems = problemsOf({
      nodes: [
        { id: 'a', type: 'telepathy', data: {} },
        { id: 'b', type: 'start', data: { greeting: 'Hi {{ }}' } },
        { id: 'c', type: 'start', data: { prompt: 'Unbalanced {{name' } },
        { id: 'd', type: 'api_trigger', data: { trigger_uuid: 'not-a-uuid', enabled: 'yes' } },
        { id: 'e', type: 'agent', data: {} },
        { id: 'f', type: 'agent', data: { prompt: 'Use {{first-name}} and }} here' } },
        { id: 'a', type: 'end', data: {} },
      ],
      edges: [{ source: 'b', target: 'nowhere' }, { source: 'ghost', target: 'a', label: 5 }],
      variables: { '1bad': {}, ok: { required: 'yes', extra: true } },
      extra: true,
    });
    const pointers = problems.map((p) => p.pointer);
    assert.deepEqual(
      [...pointers].sort(),
      [
        '/edges/0/target',
        '/edges/1/label',
        '/edges/1/source',
        '/extra',
        '/nodes',
        '/nodes/0/type',
        '/nodes/1/data/greeting',
        '/nodes/2/data/prompt',
        '/nodes/3/data/enabled',
        '/nodes/3/data/trigger_uuid',
        '/nodes/4/data/prompt',
        '/nodes/5/data/prompt',
        '/nodes/5/data/prompt',
        '/nodes/6/id',
        '/variables/1bad',
        '/variables/ok/extra',
        '/variables/ok/required',
      ].sort(),
      JSON.stringify(problems, null, 2),
    );
    const detail = (pointer: string) => problems.filter((p) => p.pointer === pointer).map((p) => p.detail).join(' | ');
    assert.match(detail('/nodes/0/type'), /Must be one of api_trigger, start, agent, end/);
    assert.match(detail('/nodes'), /exactly one start node \(found 2\)/);
    assert.match(detail('/edges/0/target'), /No node has id "nowhere"/);
    assert.match(detail('/nodes/3/data/trigger_uuid'), /Must be a UUID/);
    assert.match(detail('/nodes/3/data/enabled'), /true or false/);
    assert.match(detail('/nodes/4/data/prompt'), /Required for a agent node/);
    assert.match(detail('/nodes/1/data/greeting'), /is not a variable name/);
    assert.match(detail('/nodes/2/data/prompt'), /Unbalanced/);
    assert.match(detail('/nodes/5/data/prompt'), /"\{\{first-name\}\}" is not a variable name/);
    assert.match(detail('/nodes/5/data/prompt'), /Unbalanced/);
    assert.match(detail('/nodes/6/id'), /Duplicate node id "a"/);
    assert.match(detail('/variables/1bad'), /variable name/);
  });

  it('refuses a graph with no start node, and anything that is not an object with a nodes array', () => {
    assert.deepEqual(problemsOf({ nodes: [] }), [{ pointer: '/nodes', detail: 'A definition has exactly one start node (found 0).' }]);
    assert.deepEqual(problemsOf([]).map((p) => p.pointer), ['']);
    assert.deepEqual(problemsOf(null).map((p) => p.pointer), ['']);
    assert.deepEqual(problemsOf({ nodes: {}, edges: 'x' }).map((p) => p.pointer).sort(), ['/edges', '/nodes', '/nodes']);
  });

  it('refuses non-string text fields and duplicate trigger UUIDs', () => {
    const problems = problemsOf({
      nodes: [
        { id: 'start', type: 'start', data: { greeting: 42 } },
        { id: 't1', type: 'api_trigger', data: { trigger_uuid: TRIGGER } },
        { id: 't2', type: 'api_trigger', data: { trigger_uuid: TRIGGER.toUpperCase() } },
      ],
    });
    assert.deepEqual(problems, [
      { pointer: '/nodes/0/data/greeting', detail: 'Must be a string.' },
      { pointer: '/nodes/2/data/trigger_uuid', detail: `Duplicate trigger UUID ${TRIGGER.toUpperCase()}.` },
    ]);
  });

  it('requires a trigger_uuid on api_trigger nodes unless told that one will be minted', () => {
    const graph = { nodes: [{ id: 't', type: 'api_trigger', data: {} }, { id: 's', type: 'start', data: {} }] };
    assert.deepEqual(problemsOf(graph).map((p) => p.pointer), ['/nodes/0/data/trigger_uuid']);
    assert.equal(validateDefinition(graph, { allowMissingTriggerUuids: true }).ok, true);
  });
});

describe('mintTriggerUuids', () => {
  it('gives a fresh UUID to each api_trigger without one and leaves every other node as it was', () => {
    const graph: DefinitionGraph = {
      nodes: [
        { id: 'kept', type: 'api_trigger', data: { trigger_uuid: TRIGGER, enabled: false } },
        { id: 'new1', type: 'api_trigger', data: { enabled: true } },
        { id: 'new2', type: 'api_trigger', data: {} },
        { id: 'start', type: 'start', data: { greeting: 'Hi' } },
      ],
      edges: [],
    };
    const before = structuredClone(graph);
    const minted = mintTriggerUuids(graph);
    assert.deepEqual(graph, before, 'the input is not modified');
    assert.deepEqual(minted.nodes[0], graph.nodes[0]);
    assert.deepEqual(minted.nodes[3], graph.nodes[3]);
    const fresh = [minted.nodes[1]?.data.trigger_uuid, minted.nodes[2]?.data.trigger_uuid];
    for (const uuid of fresh) assert.ok(typeof uuid === 'string' && isUuid(uuid), `minted ${String(uuid)}`);
    assert.notEqual(fresh[0], fresh[1]);
    assert.equal(minted.nodes[1]?.data.enabled, true, 'other data is kept');
    assert.equal(validateDefinition(minted).ok, true, 'the minted graph is valid without the allowance');
    assert.deepEqual(
      triggersOf(minted).map((t) => [t.nodeId, t.enabled]),
      [['kept', false], ['new1', true], ['new2', true]],
      'a trigger is enabled unless enabled is false',
    );
  });
});

describe('mintTriggerUuids with the previous version\'s UUIDs', () => {
  it('gives a trigger without a trigger_uuid the UUID its node id had before, unless another node now names that UUID', () => {
    const OTHER = '11111111-2222-4333-8444-555555555555';
    const graph: DefinitionGraph = {
      nodes: [
        { id: 'known', type: 'api_trigger', data: {} },
        { id: 'moved', type: 'api_trigger', data: {} },
        { id: 'taker', type: 'api_trigger', data: { trigger_uuid: OTHER } },
        { id: 'fresh', type: 'api_trigger', data: {} },
        { id: 'start', type: 'start', data: {} },
      ],
      edges: [],
    };
    const minted = mintTriggerUuids(graph, new Map([['known', TRIGGER], ['moved', OTHER]]));
    const uuids = minted.nodes.map((n) => n.data.trigger_uuid);
    assert.equal(uuids[0], TRIGGER, 'kept by node id');
    assert.equal(uuids[2], OTHER, 'the explicit UUID stays where it is named');
    assert.ok(typeof uuids[1] === 'string' && isUuid(uuids[1]) && uuids[1] !== OTHER, 'the node that lost its UUID gets a fresh one');
    assert.ok(typeof uuids[3] === 'string' && isUuid(uuids[3]) && ![TRIGGER, OTHER].includes(uuids[3]));
    assert.equal(validateDefinition(minted).ok, true, 'no UUID appears twice');
  });
});

describe('templates', () => {
  it('renders {{name}}, {{a.b}} and {{name | fallback}}, with a missing value rendered empty', () => {
    const context = { name: 'Ada', appointment: { time: '10:00', room: { floor: 3 } }, empty: null, count: 2, tags: ['a'] };
    assert.equal(renderTemplate('Hello {{name}}!', context), 'Hello Ada!');
    assert.equal(renderTemplate('Hello {{ name }}!', context), 'Hello Ada!', 'spaces inside the braces are allowed');
    assert.equal(renderTemplate('At {{appointment.time}} on floor {{appointment.room.floor}}', context), 'At 10:00 on floor 3');
    assert.equal(renderTemplate('Hello {{nobody | there}}', context), 'Hello there');
    assert.equal(renderTemplate('Hello {{name | there}}', context), 'Hello Ada', 'a present value wins over the fallback');
    assert.equal(renderTemplate('Hello {{empty | friend}}', context), 'Hello friend', 'null takes the fallback');
    assert.equal(renderTemplate('[{{nobody}}] [{{appointment.missing}}] [{{name.first}}]', context), '[] [] []');
    assert.equal(renderTemplate('{{count}} {{tags}} {{appointment.room}}', context), '2 ["a"] {"floor":3}');
    assert.equal(renderTemplate('no placeholders', context), 'no placeholders');
  });

  it('reads only the context\'s own values, never inherited properties', () => {
    assert.equal(renderTemplate('[{{constructor}}] [{{toString}}] [{{name.length}}] [{{__proto__}}]', { name: 'Ada' }), '[] [] [] []');
  });

  it('reports malformed placeholders and unbalanced braces', () => {
    assert.deepEqual(templateProblems('Hello {{name}} at {{a.b}} or {{x | y z}}'), []);
    assert.equal(templateProblems('Hello {{ }}').length, 1);
    assert.equal(templateProblems('Hello {{1abc}}').length, 1);
    assert.equal(templateProblems('Hello {{a..b}}').length, 1);
    assert.deepEqual(templateProblems('Hello {{name'), ['Unbalanced "{{" or "}}".']);
    assert.deepEqual(templateProblems('Hello name}}'), ['Unbalanced "{{" or "}}".']);
    assert.deepEqual(placeholders('{{a}} and {{ b.c | fall back }}'), [
      { path: 'a', fallback: undefined },
      { path: 'b.c', fallback: 'fall back' },
    ]);
  });
});

describe('templateContext and missingRequiredVariables', () => {
  const graph = validGraph();

  it('overlays initial_context on the variable defaults', () => {
    assert.deepEqual(templateContext(graph, null), { topic: 'billing' });
    assert.deepEqual(templateContext(graph, { topic: 'refunds', name: 'Ada', extra: { a: 1 } }), { topic: 'refunds', name: 'Ada', extra: { a: 1 } });
    assert.deepEqual(templateContext({ nodes: [], edges: [] }, { a: 1 }), { a: 1 }, 'a graph without variables');
  });

  it('lists the required variables that neither a default nor the initial_context provides', () => {
    assert.deepEqual(missingRequiredVariables(graph, templateContext(graph, null)), ['appointment']);
    assert.deepEqual(missingRequiredVariables(graph, templateContext(graph, { appointment: { time: '10:00' } })), []);
    assert.deepEqual(missingRequiredVariables(graph, templateContext(graph, { appointment: null })), ['appointment'], 'null counts as missing');
    assert.deepEqual(missingRequiredVariables(graph, templateContext(graph, { topic: null, appointment: 'x' })), ['topic'], 'an explicit null overrides a default');
    assert.deepEqual(missingRequiredVariables(graph, { appointment: false, topic: 0 }), [], 'falsy values are values');
  });
});
