// The end of a round of the media part: every frame the generator sent has reached the runtime and
// every echo has come back, or nothing more has come for ROUND_QUIET_MS (a relay or a peer stalled
// on a loaded machine can hold frames for seconds: they count as late, with their latency, not as
// lost, as long as they arrive). Then both sides' counts are taken and the round is over.
import type { MediaChild } from './media-ipc.js';

export type MediaGroup = 'service' | 'floor';

/** What the generator counted in a round (bench/media-generator.ts). */
export interface RoundAtGenerator {
  calls: number;
  sent: number;
  received: number;
  duplicates: number;
  strays: number;
  foreign: number;
  sequenceBreaks: number;
  timestampBreaks: number;
  ssrcChanges: number;
  latency_ms: { samples: number; p50: number; p99: number; max: number };
  send_lateness_ms: { samples: number; p50: number; p99: number; max: number };
  latencies: number[];
}

/** What the runtime counted in a round (bench/media-runtime.ts). */
export interface RoundAtRuntime {
  received: number;
  echoed: number;
  outOfOrder: number;
  unreadable: number;
  latency_ms: { samples: number; p50: number; p99: number; max: number };
  latencies: number[];
}

/** How long a round waits with no frame arriving before what is missing counts as lost. */
const ROUND_QUIET_MS = 10_000;

async function whenAllOrQuiet(count: () => Promise<number>, expected: number): Promise<void> {
  let last = -1;
  let since = Date.now();
  for (;;) {
    const now = await count();
    if (now >= expected) return;
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since > ROUND_QUIET_MS) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Once `play` has sent its `sent` frames: waits for them at the runtime, then for their echoes, and takes both sides' counts. */
export async function finishRound(generator: MediaChild, runtime: MediaChild, group: MediaGroup, sent: number): Promise<{ atGenerator: RoundAtGenerator; atRuntime: RoundAtRuntime }> {
  await whenAllOrQuiet(() => runtime.call<number>('received', { group }), sent);
  const atRuntime = await runtime.call<RoundAtRuntime>('take', { group });
  await whenAllOrQuiet(async () => (await generator.call<{ received: number }>('round', { group })).received, atRuntime.echoed);
  const atGenerator = await generator.call<RoundAtGenerator>('round', { group, end: true });
  return { atGenerator, atRuntime };
}
