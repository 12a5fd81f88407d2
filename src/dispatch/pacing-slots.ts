// Pacing slots for the dials of one route when some of them belong to paced campaigns.
//
// A route's dials are spaced `routeSpacingMs` apart: its configuration row carries the next free
// slot, and a claim takes consecutive ones (claim-runs.ts). A campaign with its own
// `calls_per_second` is paced inside its route: its dials are also spaced at least its own spacing
// apart, from its own next free slot (migration 014's `campaign_dial_pacing`, written under the
// route's row lock, like the route's). So a campaign run's slot is the later of the two, and both
// move on past it.
//
// Taking runs strictly in order would let a slow campaign's run push every run behind it (direct
// runs, other campaigns) to its own next slot, and waste the route's slots in between. Instead each
// route slot goes to the first run, in the order given, that may be dialed then: a direct run, a run
// of a campaign paced only by the route, or one whose campaign's next slot has come. When none may,
// the route waits for the earliest campaign slot. Runs left without a slot by `horizon` are not
// given one (the claim leaves them queued). Slots handed out are thus increasing, at least the
// route's spacing apart, and for each campaign at least its spacing apart.

export interface SlotRequest {
  /** The run's campaign, null for a direct run. */
  campaignId: number | null;
  /** The campaign's calls_per_second; null: paced only by the route. */
  campaignCallsPerSecond: number | null;
}

export interface SlotPlan {
  /** Each request's slot, in the order given; undefined for one left without a slot by the horizon. */
  slots: (number | undefined)[];
  /** The route's next free slot after these (unchanged when none was given). */
  routeNextAt: number;
  /** The next free slot of each campaign that was given slots. */
  campaignNextAt: Map<number, number>;
}

function spacingOf(callsPerSecond: number, headroom: number): number {
  return (1000 * (1 + headroom)) / callsPerSecond;
}

/**
 * Slots for `requests` from the route's first free slot `routeFirst` on, none after `horizon`
 * (Infinity: every request gets one). `campaignNextAt` holds the next free slot of the campaigns
 * whose slot is still ahead (a campaign missing from it may dial at any route slot).
 */
export function planSlots(
  requests: readonly SlotRequest[],
  route: { firstAt: number; spacingMs: number },
  campaignNextAt: ReadonlyMap<number, number>,
  headroom: number,
  horizon: number,
): SlotPlan {
  const slots: (number | undefined)[] = requests.map(() => undefined);
  const next = new Map<number, number>();
  const pacedCampaign = (r: SlotRequest): number | undefined => (r.campaignId !== null && r.campaignCallsPerSecond !== null && r.campaignCallsPerSecond > 0 ? r.campaignId : undefined);
  const campaignAt = (id: number) => next.get(id) ?? campaignNextAt.get(id) ?? Number.NEGATIVE_INFINITY;

  const pending = requests.map((_, i) => i);
  let at = route.firstAt;
  let routeNextAt = route.firstAt;
  while (pending.length > 0 && at <= horizon) {
    const ready = pending.findIndex((i) => {
      const campaign = pacedCampaign(requests[i] as SlotRequest);
      return campaign === undefined || campaignAt(campaign) <= at;
    });
    if (ready === -1) {
      // Every run left waits for its campaign: the route's next dial is the earliest of their slots.
      at = Math.min(...pending.map((i) => campaignAt(pacedCampaign(requests[i] as SlotRequest) as number)));
      continue;
    }
    const index = pending[ready] as number;
    const request = requests[index] as SlotRequest;
    slots[index] = at;
    const campaign = pacedCampaign(request);
    if (campaign !== undefined) next.set(campaign, at + spacingOf(request.campaignCallsPerSecond as number, headroom));
    routeNextAt = at + route.spacingMs;
    at = routeNextAt;
    pending.splice(ready, 1);
  }
  return { slots, routeNextAt, campaignNextAt: next };
}
