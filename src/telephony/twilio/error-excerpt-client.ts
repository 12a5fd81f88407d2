// Twilio's own HTTP client, with one change: an error answer whose body is not Twilio's error
// shape (a gateway's or proxy's page, a truncated body) is handed to the SDK as one, carrying a
// bounded excerpt of what came, so the run records what actually happened. The SDK would otherwise
// raise an exception with no code and no message, and the body would be lost.
import type RequestClient from 'twilio/lib/base/RequestClient.js';
import { twilio } from './sdk.js';

/** Longest excerpt of a foreign error body kept. */
export const ERROR_EXCERPT_CHARS = 200;

/** A bounded, single-line excerpt: no control characters, whitespace collapsed. */
export function excerpt(text: string): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\s+/g, ' ').trim();
  return line.length > ERROR_EXCERPT_CHARS ? `${line.slice(0, ERROR_EXCERPT_CHARS)}…` : line;
}

function isTwilioErrorBody(body: unknown): boolean {
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return false;
    }
  }
  return typeof parsed === 'object' && parsed !== null && typeof (parsed as { message?: unknown }).message === 'string';
}

type RequestClientInstance = InstanceType<ReturnType<typeof twilio>['RequestClient']>;

let clientClass: (new (options: { timeout: number; autoRetry: boolean }) => RequestClientInstance) | undefined;

/**
 * A RequestClient keeping foreign error bodies (built on first use, like the SDK it extends). The
 * SDK's own `timeout` and `autoRetry` options only reach the client it builds itself, so a given
 * client takes them here: a request gives up after `timeout`, and is never retried (a retried create
 * could dial twice).
 */
export function errorExcerptClient(options: { timeout: number }): RequestClientInstance {
  clientClass ??= class ErrorExcerptClient extends twilio().RequestClient {
    override async request<TData>(opts: RequestClient.RequestOptions<TData>) {
      const response = await super.request<TData>(opts);
      if (response.statusCode >= 400 && !isTwilioErrorBody(response.body)) {
        const text = typeof response.body === 'string' ? response.body : JSON.stringify(response.body ?? '');
        const kept = excerpt(text);
        // The SDK builds its exception from this body: give it Twilio's shape.
        (response as { body: unknown }).body = JSON.stringify({ message: kept === '' ? '(empty body)' : kept });
      }
      return response;
    }
  };
  return new clientClass({ timeout: options.timeout, autoRetry: false });
}
