// SIP trunks as the registry knows them (telephony/definition.ts): a SIP user agent in this
// process dialing through an operator's trunk (docs/telephony.md, "SIP trunk").
import { Type } from '@sinclair/typebox';
import { maskPhoneNumbersIn } from '../../logging.js';
import { defineProvider } from '../definition.js';
import { parseSpeechCommand, SPEECH_COMMAND_PATTERN } from '../media/speech/speech-command.js';
import { SipProvider } from './provider.js';
import { decodeSipRoute, type SipRouteConfig } from './route.js';

const int = (min: number, max: number, dflt: number) => Type.Integer({ minimum: min, maximum: max, default: dflt });

/** The one SIP stack of this process, started on its first SIP call. */
const configKeys = {
  /** Address the SIP stack listens on (UDP socket; TCP listener once a TCP route dials). */
  SIP_BIND_ADDRESS: Type.String({ default: '0.0.0.0', minLength: 1 }),
  SIP_PORT: int(1, 65535, 5060),
  /** How long an unused SIP TCP or TLS connection stays open for the next request to the same peer. */
  SIP_CONNECTION_IDLE_MS: int(1_000, 3_600_000, 30_000),
  /** Largest SIP message taken over TCP or TLS (its headers, and its body, each); a peer sending more is disconnected. */
  SIP_MAX_MESSAGE_BYTES: int(1_024, 1_048_576, 65_535),
  /** Address written in Via and Contact (and the SDP offer unless a configuration names a media address); default: the bind address, or the host name when binding all interfaces. */
  SIP_PUBLIC_ADDRESS: Type.Optional(Type.String({ minLength: 1 })),
  /** How long, beyond a transfer's ring time, Dialtone waits for the final NOTIFY of a REFER the far end accepted; then the transfer counts as failed. */
  SIP_TRANSFER_GRACE_MS: int(1_000, 600_000, 15_000),
  /** Each call of a route without media_address gets its own RTP port (even) from this range, bound on SIP_BIND_ADDRESS and offered at the public address. */
  SIP_RTP_PORT_MIN: int(1024, 65534, 40000),
  SIP_RTP_PORT_MAX: int(1024, 65535, 49999),
  /** How long the agent runtime has to accept a call's media stream WebSocket before the call ends failed (agent_runtime_unreachable). */
  SIP_MEDIA_STREAM_CONNECT_TIMEOUT_MS: int(100, 60_000, 5_000),
  /** Largest message taken from the agent runtime over a call's media stream; a larger one closes the stream (and the call). */
  SIP_MEDIA_STREAM_MAX_MESSAGE_BYTES: int(1_024, 16_777_216, 1_048_576),
  /** Most audio from the agent runtime queued to play on one call, in ms (8 bytes per ms); what arrives beyond it is dropped. */
  SIP_MEDIA_STREAM_MAX_QUEUED_MS: int(1_000, 3_600_000, 120_000),
  /** How far behind real time the agent runtime's audio may fall (a stall of this node, the runtime or the network) and still be caught up by sending the late frames at once; beyond it the delay is kept. */
  SIP_MEDIA_STREAM_CATCH_UP_MS: int(20, 1_000, 100),
  /** Nothing from the agent runtime (no message, no pong to the pings sent meanwhile) for this long: the call ends failed (agent_runtime_stalled). 0: not watched. */
  SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS: int(0, 3_600_000, 15_000),
  /** Bytes of a media stream waiting to be sent because the agent runtime does not read them, past which the call ends failed (agent_runtime_stalled). */
  SIP_MEDIA_STREAM_MAX_BUFFERED_BYTES: int(16_384, 268_435_456, 1_048_576),
  /** How long a received RTP packet that follows a missing one waits for it (the reorder buffer); 0: packets pass in arrival order. */
  SIP_RTP_REORDER_MS: int(0, 1_000, 60),
  /** A call whose callee sends no RTP for this long (after the answer, and after its last packet, unless on hold) is hung up and ends failed (media_timeout). 0: no limit. */
  SIP_MEDIA_TIMEOUT_MS: int(0, 3_600_000, 30_000),
  // Machine detection from the call's audio (docs/telephony.md, "Machine detection from the call's
  // audio"), for routes without media_address. The first four mirror TWILIO_AMD_*: same meaning,
  // ranges and defaults.
  /** How long detection listens when the agent (or campaign) gives no detection_timeout_ms; then the verdict is unknown. */
  SIP_AMD_TIMEOUT_MS: int(3_000, 59_000, 30_000),
  /** A greeting longer than this is a machine's. */
  SIP_AMD_SPEECH_THRESHOLD_MS: int(1_000, 6_000, 2_400),
  /** Silence after speech that ends a greeting: a person's when it was short, a machine's end (machine_end_silence) otherwise. */
  SIP_AMD_SPEECH_END_THRESHOLD_MS: int(500, 5_000, 1_200),
  /** No speech at all for this long after the answer: the verdict is unknown. */
  SIP_AMD_SILENCE_TIMEOUT_MS: int(2_000, 10_000, 5_000),
  /** A greeting of this many words (speech separated by short silences) is a machine's, however short. */
  SIP_AMD_MAX_WORDS: int(2, 50, 6),
  /** The least length of a beep: a pure tone between 400 and 2000 Hz that lasts this long is a voicemail's. */
  SIP_AMD_BEEP_MIN_MS: int(40, 2_000, 120),
  /** How far above the line's noise floor (learned as the call goes) audio must be to count as speech, in dB. */
  SIP_AMD_VOICE_MARGIN_DB: int(3, 40, 12),
  /** The least length of a fax's answer tone (CED, 2100 Hz) to call the callee a fax: above any beep's, under CED's own 2.6 s. */
  SIP_AMD_FAX_TONE_MIN_MS: int(300, 2_600, 1_500),
  // A message left on a voicemail (on_machine "leave_message", docs/telephony.md, "Leaving a
  // message on a SIP call"): spoken by a command of the operator's choosing.
  /** A text-to-speech command that reads the message on standard input and writes a WAV file to standard output, run without a shell (words separated by spaces, no quoting); unset: leave_message is refused on SIP routes. */
  SIP_SPEECH_COMMAND: Type.Optional(Type.String({ minLength: 1, pattern: SPEECH_COMMAND_PATTERN })),
  /** How long the speech command and the conversion of its audio may take, after which the message is given up and the run ends failed (voicemail_failed). */
  SIP_SPEECH_TIMEOUT_MS: int(500, 120_000, 15_000),
  /** The most bytes of WAV taken from the speech command; more ends the message as a timeout does. */
  SIP_SPEECH_MAX_BYTES: int(1_024, 67_108_864, 8_388_608),
};

export const sipDefinition = defineProvider<SipRouteConfig, typeof configKeys>({
  name: 'sip',
  summary: 'A SIP trunk, dialed by a SIP user agent in this process (UDP, TCP or TLS).',
  capabilities: {
    callsOutliveNode: false,
    dialsSipUris: true,
    // From the call's audio, on routes without media_address (answeringMachineRefusal below).
    supportsMachineDetection: true,
    supportsTransfer: true,
    sendsDtmf: true,
  },
  settings: [
    { name: 'host', type: 'string', required: true, description: 'The trunk\'s host name or IP address.' },
    { name: 'port', type: 'integer', description: 'The trunk\'s port (default 5060, 5061 for TLS).' },
    { name: 'transport', type: 'string', description: 'udp (default), tcp or tls.' },
    { name: 'outbound_proxy', type: 'string', description: 'A SIP URI every call goes through first (";lr" for a loose router).' },
    { name: 'tls_server_name', type: 'string', description: 'The name the TLS peer\'s certificate carries, when not the host.' },
    { name: 'tls_ca_pem', type: 'string', description: 'PEM CA certificates the TLS peer\'s certificate must chain to.' },
    { name: 'media_address', type: 'string', description: 'Where the SDP offer says to send media (your own RTP endpoint; Dialtone then never hears the call, so it cannot detect machines); unset: each call gets its own RTP port and is relayed to AGENT_RUNTIME_URL.' },
    { name: 'media_port', type: 'integer', description: 'The media port with media_address (default 4000).' },
  ],
  credentials: [
    { name: 'username', type: 'string', description: 'Digest user name, with password.' },
    { name: 'password', type: 'string', description: 'Digest password, with username.' },
  ],
  decodeRoute: decodeSipRoute,
  answeringMachineRefusal: (config, asked, service) => {
    if (config.trunk.mediaAddress) {
      return 'cannot tell a machine from a person through this route: its media_address sends the call\'s audio to your own media server, so Dialtone never hears it. Remove media_address to have Dialtone relay each call and detect from its audio.';
    }
    if (asked?.onMachine === 'leave_message' && !service?.SIP_SPEECH_COMMAND) {
      return 'cannot leave a message on a SIP call: SIP_SPEECH_COMMAND is not set, so Dialtone has no speech to play it with. Set SIP_SPEECH_COMMAND to a text-to-speech command (e.g. "espeak-ng --stdin --stdout"), or use on_machine "hangup" or "connect_agent" (the agent runtime can speak to the machine).';
    }
    return undefined;
  },
  configKeys,
  callbackRoutes: [],
  create: ({ config, clock, logger, emit, emitVerdict, emitTransfer, agentRuntime }) =>
    new SipProvider(
      {
        bindAddress: config.SIP_BIND_ADDRESS,
        port: config.SIP_PORT,
        publicAddress: config.SIP_PUBLIC_ADDRESS,
        connectionIdleMs: config.SIP_CONNECTION_IDLE_MS,
        maxMessageBytes: config.SIP_MAX_MESSAGE_BYTES,
        onTransportError: (error) => logger.warn({ err: error }, 'SIP transport error'),
        transferGraceMs: config.SIP_TRANSFER_GRACE_MS,
        rtpPorts: { min: config.SIP_RTP_PORT_MIN, max: config.SIP_RTP_PORT_MAX },
        agentRuntime,
        mediaStream: {
          connectTimeoutMs: config.SIP_MEDIA_STREAM_CONNECT_TIMEOUT_MS,
          maxMessageBytes: config.SIP_MEDIA_STREAM_MAX_MESSAGE_BYTES,
          maxQueuedMs: config.SIP_MEDIA_STREAM_MAX_QUEUED_MS,
          catchUpMs: config.SIP_MEDIA_STREAM_CATCH_UP_MS,
          idleTimeoutMs: config.SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS,
          maxBufferedBytes: config.SIP_MEDIA_STREAM_MAX_BUFFERED_BYTES,
        },
        callMedia: { reorderMs: config.SIP_RTP_REORDER_MS, mediaTimeoutMs: config.SIP_MEDIA_TIMEOUT_MS },
        onMediaWarning: (runId, message, error) => logger.warn({ runId, ...(error ? { err: error } : {}) }, message),
        machineDetection: {
          timeoutMs: config.SIP_AMD_TIMEOUT_MS,
          speechThresholdMs: config.SIP_AMD_SPEECH_THRESHOLD_MS,
          speechEndThresholdMs: config.SIP_AMD_SPEECH_END_THRESHOLD_MS,
          silenceTimeoutMs: config.SIP_AMD_SILENCE_TIMEOUT_MS,
          maxWords: config.SIP_AMD_MAX_WORDS,
          beepMinMs: config.SIP_AMD_BEEP_MIN_MS,
          voiceMarginDb: config.SIP_AMD_VOICE_MARGIN_DB,
          faxToneMinMs: config.SIP_AMD_FAX_TONE_MIN_MS,
        },
        onMachineVerdict: (runId, verdict) => logger.info({ runId, answeredBy: verdict.raw, afterMs: verdict.afterMs, why: verdict.why }, 'machine detection decided'),
        ...(config.SIP_SPEECH_COMMAND
          ? { speech: { argv: parseSpeechCommand(config.SIP_SPEECH_COMMAND), timeoutMs: config.SIP_SPEECH_TIMEOUT_MS, maxBytes: config.SIP_SPEECH_MAX_BYTES } }
          : {}),
        // The command's standard error may quote the message (the callee's context): its phone numbers are masked like every log's.
        onSpeechFailure: (runId, error) =>
          logger.warn({ runId, failure: error.failure, ...(error.stderr ? { stderr: maskPhoneNumbersIn(error.stderr) } : {}) }, `voicemail message not left: ${error.message}`),
      },
      clock,
      emit,
      emitTransfer,
      emitVerdict,
    ),
});
