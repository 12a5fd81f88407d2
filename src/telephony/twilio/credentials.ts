// The shape of a Twilio telephony configuration's credentials (stored encrypted). The REST API
// accepts the account's auth token or an API key; callbacks, though, are signed with the account's
// auth token whatever authenticates the REST calls, so the auth token is always required.
import type { FieldError } from '../../errors.js';

export interface TwilioCredentials {
  accountSid: string;
  authToken: string;
  /** When set, REST calls authenticate with this API key instead of the auth token. */
  apiKey?: { sid: string; secret: string };
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

/** Problems with a credentials object, each at its JSON Pointer; empty when it is usable. */
export function twilioCredentialProblems(raw: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  const sid = text(raw.account_sid);
  if (!sid || !/^AC[0-9a-fA-F]{32}$/.test(sid)) problems.push({ pointer: '/credentials/account_sid', detail: 'Must be the account SID (AC followed by 32 hex digits).' });
  if (!text(raw.auth_token)) problems.push({ pointer: '/credentials/auth_token', detail: 'Required: Twilio signs its callbacks with the account auth token.' });
  const keySid = text(raw.api_key_sid);
  const keySecret = text(raw.api_key_secret);
  if (keySid !== undefined && !/^SK[0-9a-fA-F]{32}$/.test(keySid)) problems.push({ pointer: '/credentials/api_key_sid', detail: 'Must be an API key SID (SK followed by 32 hex digits).' });
  if ((keySid === undefined) !== (keySecret === undefined)) problems.push({ pointer: '/credentials/api_key_secret', detail: 'api_key_sid and api_key_secret go together.' });
  return problems;
}

export function parseTwilioCredentials(raw: Record<string, unknown>): TwilioCredentials {
  const problems = twilioCredentialProblems(raw);
  if (problems.length > 0) throw new Error(`Twilio credentials are not usable: ${problems.map((p) => `${p.pointer} ${p.detail}`).join(' ')}`);
  const keySid = text(raw.api_key_sid);
  const keySecret = text(raw.api_key_secret);
  return {
    accountSid: raw.account_sid as string,
    authToken: raw.auth_token as string,
    ...(keySid && keySecret ? { apiKey: { sid: keySid, secret: keySecret } } : {}),
  };
}
