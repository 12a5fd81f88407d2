// A Map split into many small ones by a hash of its string keys, for the imports that remember a
// million keys while the event loop keeps serving.
//
// Why: a V8 Map doubles its table when it fills and rehashes every entry in that one step; near a
// million entries that step alone held the event loop 45-85 ms (the suppression import, at 250,000
// and 500,000 numbers). Split over SHARDS maps, each doubling rehashes a SHARDS-th of the entries.
// Iteration order across shards is not insertion order: a caller that needs its keys in order
// keeps them in an array beside it.

/** A power of two, so that the shard is the hash's low bits. */
const SHARDS = 256;

/** A string hash (31 × h + c, as Java's String.hashCode): cheap over a short key and spread over the low bits. */
function shardOf(key: string): number {
  let hash = 0;
  for (let i = 0; i < key.length; i++) hash = (Math.imul(hash, 31) + key.charCodeAt(i)) | 0;
  return hash & (SHARDS - 1);
}

export class ShardedMap<V> {
  private readonly shards: Array<Map<string, V>> = Array.from({ length: SHARDS }, () => new Map<string, V>());
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    return this.shard(key).get(key);
  }

  set(key: string, value: V): this {
    const shard = this.shard(key);
    const before = shard.size;
    shard.set(key, value);
    this.count += shard.size - before;
    return this;
  }

  private shard(key: string): Map<string, V> {
    // Always defined: shardOf answers 0 to SHARDS - 1.
    return this.shards[shardOf(key)] as Map<string, V>;
  }
}
