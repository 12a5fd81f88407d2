// The streams a node serves, counted per node, per organization and per API key, each with its own
// cap. A slot is taken once the request is authenticated and within its rate limit, before the
// response is hijacked, and given back exactly once whatever ends the stream: the client leaving
// (at any step, even before the stream began), the node closing it, or a failure to start it.
// Per-organization and per-key caps keep one tenant (or one runaway client of one key) from taking
// every slot of the node, which would shut the stream off for every other organization.

export interface StreamSlotLimits {
  /** Most streams this node serves at once (STREAM_MAX_CONNECTIONS). */
  perNode: number;
  /** Most streams of one organization on this node (STREAM_MAX_CONNECTIONS_PER_ORG). */
  perOrganization: number;
  /** Most streams of one API key on this node (STREAM_MAX_CONNECTIONS_PER_KEY). */
  perKey: number;
}

export interface StreamOwner {
  orgId: number;
  keyId: number;
}

/** Which cap refused a stream, and its value. */
export interface SlotRefusal {
  refused: 'node' | 'organization' | 'key';
  limit: number;
}

/** A stream's place; `release()` may be called any number of times, it gives the place back once. */
export interface StreamSlot {
  release(): void;
}

export class StreamSlots {
  private total = 0;
  private readonly byOrganization = new Map<number, number>();
  private readonly byKey = new Map<number, number>();

  constructor(private readonly limits: StreamSlotLimits) {}

  /** Streams open on this node. */
  get open(): number {
    return this.total;
  }

  openOf(owner: StreamOwner): { organization: number; key: number } {
    return { organization: this.byOrganization.get(owner.orgId) ?? 0, key: this.byKey.get(owner.keyId) ?? 0 };
  }

  /** A slot for `owner`, or which cap is reached. The key's cap is checked first: it is the narrowest answer. */
  acquire(owner: StreamOwner): StreamSlot | SlotRefusal {
    const { organization, key } = this.openOf(owner);
    if (key >= this.limits.perKey) return { refused: 'key', limit: this.limits.perKey };
    if (organization >= this.limits.perOrganization) return { refused: 'organization', limit: this.limits.perOrganization };
    if (this.total >= this.limits.perNode) return { refused: 'node', limit: this.limits.perNode };
    this.total++;
    this.byOrganization.set(owner.orgId, organization + 1);
    this.byKey.set(owner.keyId, key + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        decrement(this.byOrganization, owner.orgId);
        decrement(this.byKey, owner.keyId);
      },
    };
  }
}

export function isRefusal(result: StreamSlot | SlotRefusal): result is SlotRefusal {
  return 'refused' in result;
}

/** Counts that reach zero are removed, so the maps hold only owners with open streams. */
function decrement(counts: Map<number, number>, id: number): void {
  const left = (counts.get(id) ?? 0) - 1;
  if (left > 0) counts.set(id, left);
  else counts.delete(id);
}
