// The Twilio provider: places calls through Twilio's REST API with the official SDK and ends them
// the same way. What happens to a call comes back as signed status callbacks
// (http/routes/twilio-webhooks.ts), which any node may receive; this class never sees them.
//
// Twilio enforces the ring timeout (`Timeout`) and the maximum duration (`TimeLimit`) itself, so a
// call ends at the carrier even if the node that placed it is gone; the callback reports it.
import type TwilioSdk from 'twilio';
import type { Config } from '../../config.js';
import type { TelephonyConfigurationRow } from '../../store/schema.js';
import type { CredentialsCipher } from '../credentials-cipher.js';
import { DialRefusedError, type DialRequest, type LiveCall, type TelephonyProvider } from '../provider.js';
import { parseTwilioCredentials } from './credentials.js';
import { errorExcerptClient } from './error-excerpt-client.js';
import { twilio } from './sdk.js';

type TwilioClient = ReturnType<typeof TwilioSdk>;

/** Where Twilio calls back for a run: its answer (TwiML) and its status callbacks. */
export function twilioCallbackUrls(publicBaseUrl: string, runId: number): { answer: string; status: string } {
  const base = `${publicBaseUrl.replace(/\/+$/, '')}/api/v1/providers/twilio/runs/${runId}`;
  return { answer: `${base}/answer`, status: `${base}/status` };
}

export class TwilioProvider implements TelephonyProvider {
  readonly name = 'twilio' as const;
  readonly callsOutliveNode = true;
  /** One SDK client per stored credentials, so connections are reused across calls. */
  private readonly clients = new Map<string, TwilioClient>();

  constructor(
    private readonly config: Pick<Config, 'TWILIO_API_BASE_URL' | 'PUBLIC_BASE_URL' | 'MAX_CALL_DURATION_MS' | 'DIAL_TIMEOUT_MS'>,
    private readonly cipher: CredentialsCipher,
  ) {}

  async dial(request: DialRequest): Promise<{ providerCallId: string }> {
    const publicBaseUrl = this.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl) throw new DialRefusedError('failed', 'public_base_url_unset', 'PUBLIC_BASE_URL is not set: Twilio would have nowhere to call back.');
    if (!request.from) throw new DialRefusedError('failed', 'caller_id_unset', 'The telephony configuration has no caller ID.');
    const urls = twilioCallbackUrls(publicBaseUrl, request.runId);
    try {
      const call = await this.client(request.configuration).calls.create({
        to: request.to,
        from: request.from,
        url: urls.answer,
        method: 'POST',
        statusCallback: urls.status,
        statusCallbackMethod: 'POST',
        statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'],
        timeout: Math.max(1, Math.ceil(request.ringTimeoutMs / 1000)),
        timeLimit: Math.max(1, Math.ceil(this.config.MAX_CALL_DURATION_MS / 1000)),
      });
      return { providerCallId: call.sid };
    } catch (error) {
      // A REST error is Twilio refusing this call (bad number, bad credentials, …): the run ends
      // failed with Twilio's code and message. Anything else (network) is the dispatcher's to judge.
      if (error instanceof twilio().RestException) {
        const { raw, detail } = describeRestError(error);
        throw new DialRefusedError('failed', raw, detail);
      }
      throw error;
    }
  }

  async hangUp(call: LiveCall): Promise<void> {
    // `completed` ends a call in any phase (`canceled` would leave an answered call up).
    await this.client(call.configuration).calls(call.providerCallId).update({ status: 'completed' });
  }

  async close(): Promise<void> {
    this.clients.clear();
  }

  private client(configuration: TelephonyConfigurationRow): TwilioClient {
    const envelope = configuration.credentials_encrypted;
    if (envelope === null) throw new DialRefusedError('failed', 'credentials_unset', 'The Twilio configuration has no credentials.');
    let client = this.clients.get(envelope);
    if (!client) {
      const credentials = parseTwilioCredentials(this.cipher.decrypt(configuration.org_id, envelope));
      const [username, password] = credentials.apiKey ? [credentials.apiKey.sid, credentials.apiKey.secret] : [credentials.accountSid, credentials.authToken];
      client = twilio()(username, password, { accountSid: credentials.accountSid, autoRetry: false, timeout: this.config.DIAL_TIMEOUT_MS, httpClient: errorExcerptClient() });
      // The SDK builds every REST URL from its domain's base URL; pointing it elsewhere (a regional
      // endpoint, a test server speaking Twilio's wire format) changes nothing else in the path.
      client.api.baseUrl = this.config.TWILIO_API_BASE_URL;
      this.clients.set(envelope, client);
    }
    return client;
  }
}

/**
 * Twilio's words for a refused request, or what came instead: a gateway or proxy in front of the
 * API answers with a body that is not Twilio's error shape (error-excerpt-client.ts passes on an
 * excerpt of it as the message, without a code). Said as such, never as "undefined".
 */
export function describeRestError(error: { status: number; code?: unknown; message?: unknown }): { raw: string; detail: string } {
  const code = typeof error.code === 'number' ? error.code : undefined;
  const message = typeof error.message === 'string' && error.message.trim() !== '' && !error.message.startsWith('[HTTP ') ? error.message : undefined;
  if (code !== undefined && message !== undefined) return { raw: `${code} ${message}`, detail: `Twilio refused the call: ${message}` };
  const raw = `HTTP ${error.status}${code !== undefined ? ` ${code}` : ''}${message !== undefined ? ` ${message}` : ''}`;
  return { raw, detail: `The Twilio API answered HTTP ${error.status} without a Twilio error${message !== undefined ? `: ${message}` : ''}; the call was not placed.` };
}
