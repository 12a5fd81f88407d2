import { createRequire } from 'node:module';
import type TwilioSdk from 'twilio';

/**
 * The SDK, loaded on first use (a dial, or a callback for a Twilio run): it is among the heaviest
 * imports (some 10 MB of a node's memory), and most processes that build this provider never use
 * Twilio (every CLI command, a node without Twilio routes). It is CommonJS, so a synchronous
 * require yields the very module `import twilio from 'twilio'` would.
 */
let sdk: typeof TwilioSdk | undefined;
export function twilio(): typeof TwilioSdk {
  sdk ??= createRequire(import.meta.url)('twilio') as typeof TwilioSdk;
  return sdk;
}
