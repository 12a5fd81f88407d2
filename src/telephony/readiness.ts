// Whether a telephony configuration can place a call now, judged at request time so a caller
// hears "not ready" (422 telephony_not_ready) instead of a run that fails at dial time.
import type { TelephonyConfigurationRow } from '../store/schema.js';
import { decodeJson } from '../store/store.js';

export function readinessProblems(config: TelephonyConfigurationRow): string[] {
  const callerIds = decodeJson<string[]>(config.caller_ids);
  const settings = decodeJson<Record<string, unknown>>(config.settings);
  switch (config.provider) {
    case 'simulator':
      return [];
    case 'twilio': {
      const problems: string[] = [];
      if (config.credentials_encrypted === null) problems.push('Twilio credentials are not set.');
      if (callerIds.length === 0) problems.push('No caller ID is configured.');
      return problems;
    }
    case 'sip': {
      const problems: string[] = [];
      if (typeof settings.host !== 'string' || settings.host.length === 0) problems.push('The SIP trunk host is not set.');
      return problems;
    }
  }
}
