// Whether a telephony configuration can place a call now, judged at request time so a caller
// hears "not ready" (422 telephony_not_ready) instead of a run that fails at dial time.
import type { TelephonyConfigurationRow } from '../store/schema.js';
import { decodeJson } from '../store/store.js';
import { sipSettingsProblems } from './sip/settings.js';

export interface ServiceSettings {
  /** Where providers call back (PUBLIC_BASE_URL). */
  publicBaseUrl: string | undefined;
}

export function readinessProblems(config: TelephonyConfigurationRow, service: ServiceSettings): string[] {
  const callerIds = decodeJson<string[]>(config.caller_ids);
  const settings = decodeJson<Record<string, unknown>>(config.settings);
  switch (config.provider) {
    case 'simulator':
      return [];
    case 'twilio': {
      const problems: string[] = [];
      if (config.credentials_encrypted === null) problems.push('Twilio credentials are not set.');
      if (callerIds.length === 0) problems.push('No caller ID is configured.');
      if (!service.publicBaseUrl) problems.push('PUBLIC_BASE_URL is not set, so Twilio would have nowhere to send the call\'s progress.');
      return problems;
    }
    case 'sip': {
      const problems: string[] = [];
      for (const problem of sipSettingsProblems(settings)) problems.push(`settings${problem.pointer.slice('/settings'.length)}: ${problem.detail}`);
      return problems;
    }
  }
}
