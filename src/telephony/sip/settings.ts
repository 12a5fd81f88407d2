// A SIP telephony configuration: the trunk's non-secret settings (configuration `settings`) and
// the optional digest credentials (stored encrypted).
import type { FieldError } from '../../errors.js';

export interface SipTrunk {
  host: string;
  port: number;
  /** Where our SDP offer says to send media (an RTP endpoint of the agent runtime or a media server). */
  mediaAddress: string | undefined;
  mediaPort: number;
}

export interface SipCredentials {
  username: string;
  password: string;
}

const isPort = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0 && (value as number) < 65536;

export function sipSettingsProblems(settings: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  if (typeof settings.host !== 'string' || !/^[A-Za-z0-9.\-:[\]]+$/.test(settings.host)) problems.push({ pointer: '/settings/host', detail: 'Required: the trunk\'s host name or IP address.' });
  if (settings.port !== undefined && !isPort(settings.port)) problems.push({ pointer: '/settings/port', detail: 'Must be a port number (1 to 65535).' });
  if (settings.transport !== undefined && settings.transport !== 'udp') problems.push({ pointer: '/settings/transport', detail: 'Must be "udp": TCP is not supported yet.' });
  if (settings.media_address !== undefined && typeof settings.media_address !== 'string') problems.push({ pointer: '/settings/media_address', detail: 'Must be an IP address.' });
  if (settings.media_port !== undefined && !isPort(settings.media_port)) problems.push({ pointer: '/settings/media_port', detail: 'Must be a port number (1 to 65535).' });
  return problems;
}

export function sipCredentialProblems(credentials: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  if (typeof credentials.username !== 'string' || credentials.username.length === 0) problems.push({ pointer: '/credentials/username', detail: 'Required with a password.' });
  if (typeof credentials.password !== 'string' || credentials.password.length === 0) problems.push({ pointer: '/credentials/password', detail: 'Required with a username.' });
  return problems;
}

export function sipTrunkOf(settings: Record<string, unknown>): SipTrunk {
  return {
    host: String(settings.host),
    port: isPort(settings.port) ? settings.port : 5060,
    mediaAddress: typeof settings.media_address === 'string' ? settings.media_address : undefined,
    mediaPort: isPort(settings.media_port) ? settings.media_port : 4000,
  };
}

export function parseSipCredentials(raw: Record<string, unknown>): SipCredentials {
  const problems = sipCredentialProblems(raw);
  if (problems.length > 0) throw new Error(`SIP credentials are not usable: ${problems.map((p) => `${p.pointer} ${p.detail}`).join(' ')}`);
  return { username: raw.username as string, password: raw.password as string };
}
