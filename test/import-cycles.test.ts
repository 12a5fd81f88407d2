// No module under src/ imports itself back, however indirectly: a cycle makes load order decide
// which side sees the other half-initialized, and ties folders that should be layered
// (docs/design.md, "Folder map").
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importCycles, importGraph, type ImportGraph } from './helpers/import-graph.js';

const SRC = fileURLToPath(new URL('../src', import.meta.url));

describe('import cycles', () => {
  it('no module under src/ is part of an import cycle', () => {
    const graph = importGraph(SRC);
    assert.ok(graph.size > 100, `expected the whole of src/, read ${graph.size} modules`);
    assert.ok(graph.get('deps.ts')?.includes('telephony/registry.ts'), 'the walk sees deps.ts import the provider registry');
    assert.deepEqual(importCycles(graph), []);
  });

  it('finds a cycle through several modules in a synthetic graph, and none once it is broken', () => {
    const graph: ImportGraph = new Map([
      ['deps.ts', ['telephony/simulator.ts', 'config.ts']],
      ['telephony/simulator.ts', ['telephony/provider.ts', 'deps.ts']],
      ['telephony/provider.ts', []],
      ['config.ts', []],
    ]);
    assert.deepEqual(importCycles(graph), [['deps.ts', 'telephony/simulator.ts']]);
    graph.set('telephony/simulator.ts', ['telephony/provider.ts', 'shared/clock.ts']);
    graph.set('shared/clock.ts', []);
    assert.deepEqual(importCycles(graph), []);
  });

  it('finds a module that imports itself', () => {
    assert.deepEqual(importCycles(new Map([['a.ts', ['a.ts']]])), [['a.ts']]);
  });
});
