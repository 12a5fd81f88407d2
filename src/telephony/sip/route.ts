// A SIP route as the provider interface wants it: the settings and credentials checked against
// settings.ts (every problem listed), then typed.
import type { RouteDecoding, RouteInput } from '../provider.js';
import { parseSipCredentials, sipCredentialProblems, sipSettingsProblems, sipTrunkOf, type SipCredentials, type SipTrunk } from './settings.js';

export interface SipRouteConfig {
  trunk: SipTrunk;
  credentials: SipCredentials | undefined;
}

export function decodeSipRoute(input: RouteInput): RouteDecoding<SipRouteConfig> {
  const problems = [...sipSettingsProblems(input.settings), ...(input.credentials ? sipCredentialProblems(input.credentials) : [])];
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, config: { trunk: sipTrunkOf(input.settings), credentials: input.credentials ? parseSipCredentials(input.credentials) : undefined } };
}
