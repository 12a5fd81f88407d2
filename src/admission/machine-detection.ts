// A run that asks who answered must go through a route that can tell (its provider's
// `supportsMachineDetection` capability, telephony/registry.ts, and the route's own settings: a SIP
// route with media_address sends the call's audio to the operator's media server, so Dialtone
// never hears it; and a message cannot be left on a SIP call without SIP_SPEECH_COMMAND). Asking for detection through one that cannot is refused when the call is
// requested, never silently ignored, with the reason: part of admission's readiness stage
// (admission.ts), so a direct call, its dry run and a campaign's creation refuse it alike.
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import type { TelephonyConfigurationRow } from '../store/schema/schema.js';
import type { AnsweringMachine } from '../workflows/answering-machine.js';

export function refuseUndetectableRoute(deps: Pick<Deps, 'registry' | 'routes' | 'config'>, route: TelephonyConfigurationRow, settings: AnsweringMachine | null | undefined): void {
  if (!settings || settings.detect === 'off') return;
  const asked = { detect: settings.detect, onMachine: settings.on_machine ?? 'connect_agent' };
  const definition = deps.registry.find(route.provider);
  const problem = (why: string) =>
    new DialtoneError('machine_detection_unsupported', `The agent asks who answered (answering_machine.detect "${asked.detect}"), but telephony configuration ${route.id} ("${route.name}") is ${route.provider}, which ${why}`, {
      extra: { telephony_configuration_id: route.id, provider: route.provider },
    });
  if (!definition?.capabilities.supportsMachineDetection) throw problem('cannot tell a machine from a person.');
  const decoded = deps.routes.decode(route);
  // A route that does not fit its provider is refused by readiness, which came first.
  const why = decoded.ok ? definition.answeringMachineRefusal?.(decoded.route.config, asked, deps.config) : undefined;
  if (why) throw problem(why);
}
