// The Map split by a hash of its keys that the suppression import remembers its numbers in
// (shared/sharded-map.ts): it must answer as one Map would.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ShardedMap } from '../src/shared/sharded-map.js';

describe('ShardedMap', () => {
  it('answers each key with its latest value and counts each key once, as one Map would', () => {
    const sharded = new ShardedMap<number>();
    const plain = new Map<string, number>();
    // Numbers that share their last digits, and keys of any length, the empty one included.
    const keys = [...Array.from({ length: 5_000 }, (_, i) => `+1646${2_000_000 + (i % 3_000) * 100}`), '', 'x', '+44 20 7946 0000'];
    keys.forEach((key, i) => {
      sharded.set(key, i);
      plain.set(key, i);
    });
    assert.equal(sharded.size, plain.size);
    for (const [key, value] of plain) assert.equal(sharded.get(key), value);
    assert.equal(sharded.get('+16460000000'), undefined);
  });
});
