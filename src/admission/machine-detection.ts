// A run that asks who answered must go through a route whose provider can tell (its
// `supportsMachineDetection` capability, telephony/registry.ts): a SIP trunk gives no verdict of its own, so asking for detection through one
// is refused when the call is requested, never silently ignored: part of admission's readiness
// stage (admission.ts), so a direct call, its dry run and a campaign's creation refuse it alike.
import { DialtoneError } from '../errors.js';
import type { ProviderRegistry } from '../telephony/registry.js';
import type { AnsweringMachine } from '../workflows/answering-machine.js';

export function refuseUndetectableRoute(
  registry: ProviderRegistry,
  route: { id: number; name: string; provider: string },
  settings: AnsweringMachine | null | undefined,
): void {
  if (!settings || settings.detect === 'off' || registry.capabilities(route.provider).supportsMachineDetection) return;
  throw new DialtoneError(
    'machine_detection_unsupported',
    `The agent asks who answered (answering_machine.detect "${settings.detect}"), but telephony configuration ${route.id} ("${route.name}") is ${route.provider}, which cannot tell a machine from a person.`,
    { extra: { telephony_configuration_id: route.id, provider: route.provider } },
  );
}
