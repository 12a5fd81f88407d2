// Twilio as the registry knows it (telephony/definition.ts): calls held by Twilio, placed over its
// REST API, their progress reported by signed callbacks (docs/telephony.md, "Twilio").
import { Type } from '@sinclair/typebox';
import { defineProvider } from '../definition.js';
import { decodeTwilioRoute, TwilioProvider, type TwilioRouteConfig } from './provider.js';

const configKeys = {
  /** Twilio's REST API; change it only for a regional endpoint or a test server speaking its wire format. */
  TWILIO_API_BASE_URL: Type.String({ default: 'https://api.twilio.com', pattern: '^https?://' }),
  /** Times Twilio retries a failed callback (its connection override `rc`, 0 to 5); 0 leaves Twilio's default (no retry). */
  TWILIO_CALLBACK_RETRIES: Type.Integer({ minimum: 0, maximum: 5, default: 5 }),
  /** Which failures Twilio retries (connection override `rp`): all, 4xx, 5xx, ct (connect timeout), rt (read timeout), comma-separated. */
  TWILIO_CALLBACK_RETRY_POLICY: Type.String({ default: 'all', pattern: '^(all|4xx|5xx|ct|rt)(,(all|4xx|5xx|ct|rt))*$' }),
  // Answering-machine detection's tuning (docs/telephony.md, "Answering-machine detection"), sent on
  // every create request that asks for detection. The defaults are Twilio's own, the ranges those
  // Twilio documents for each parameter.
  /** MachineDetectionTimeout when the agent (or campaign) gives no detection_timeout_ms: 3000 to 59000 ms, sent in whole seconds. */
  TWILIO_AMD_TIMEOUT_MS: Type.Integer({ minimum: 3_000, maximum: 59_000, default: 30_000 }),
  /** MachineDetectionSpeechThreshold: speech longer than this is a machine's, 1000 to 6000 ms. */
  TWILIO_AMD_SPEECH_THRESHOLD_MS: Type.Integer({ minimum: 1_000, maximum: 6_000, default: 2_400 }),
  /** MachineDetectionSpeechEndThreshold: silence after speech that ends it, 500 to 5000 ms. */
  TWILIO_AMD_SPEECH_END_THRESHOLD_MS: Type.Integer({ minimum: 500, maximum: 5_000, default: 1_200 }),
  /** MachineDetectionSilenceTimeout: initial silence after which the verdict is unknown, 2000 to 10000 ms. */
  TWILIO_AMD_SILENCE_TIMEOUT_MS: Type.Integer({ minimum: 2_000, maximum: 10_000, default: 5_000 }),
};

export const twilioDefinition = defineProvider<TwilioRouteConfig, typeof configKeys>({
  name: 'twilio',
  summary: 'Twilio Programmable Voice: calls placed over its REST API, progress by signed callbacks.',
  capabilities: {
    callsOutliveNode: true,
    dialsSipUris: false,
    // Twilio's AnsweringMachineDetection parameter on a call (issue 31 asks for it).
    supportsMachineDetection: true,
    // A blind transfer by a call update whose TwiML <Dial>s the target; digits by <Play digits>.
    supportsTransfer: true,
    sendsDtmf: true,
  },
  settings: [],
  credentials: [
    { name: 'account_sid', type: 'string', required: true, description: 'The account SID (AC followed by 32 hex digits).' },
    { name: 'auth_token', type: 'string', required: true, description: 'The account auth token: Twilio signs its callbacks with it.' },
    { name: 'api_key_sid', type: 'string', description: 'An API key SID (SK…); REST calls then authenticate with the key.' },
    { name: 'api_key_secret', type: 'string', description: 'The API key\'s secret, with api_key_sid.' },
  ],
  decodeRoute: decodeTwilioRoute,
  configKeys,
  callbackRoutes: ['answer', 'status', 'amd', 'transfer'],
  create: ({ config }) => new TwilioProvider(config),
});
