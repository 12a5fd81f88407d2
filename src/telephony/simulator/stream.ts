// A simulated answered call streamed to the agent runtime (docs/simulator.md, "Streaming to the
// agent runtime"): the same WebSocket and Media Streams messages a SIP call's media uses
// (telephony/media/media-stream-bridge.ts), with the simulated callee at the other end instead of
// RTP. The callee says its voice (audio.ts) one 20 ms frame every 20 ms from the moment the stream
// opens; what the runtime sends is paced out by the bridge's playout, as to a SIP callee, and
// written to a WAV file when SIMULATOR_STREAM_RECORD_DIR asks.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../../shared/clock.js';
import type { AgentRuntimeHandOff } from '../definition.js';
import { MediaStreamBridge } from '../media/media-stream-bridge.js';
import { FRAME_MS, MAX_CATCH_UP, SAMPLES_PER_FRAME } from '../media/playout.js';
import { voiceFrame, WavRecorder, type CalleeVoice } from './audio.js';

/** How the simulator streams its answered calls (SIMULATOR_STREAM*, AGENT_RUNTIME_URL). */
export interface SimulatorStreaming {
  runtime: AgentRuntimeHandOff;
  /** SIMULATOR_STREAM: whether a route that says nothing streams its calls. */
  byDefault: boolean;
  /** SIMULATOR_STREAM_CONNECT_TIMEOUT_MS, SIMULATOR_STREAM_MAX_MESSAGE_BYTES, SIMULATOR_STREAM_MAX_QUEUED_MS, SIMULATOR_STREAM_CATCH_UP_MS. */
  limits: { connectTimeoutMs: number; maxMessageBytes: number; maxQueuedMs: number; catchUpMs: number };
  voice: CalleeVoice;
  /** SIMULATOR_STREAM_RECORD_DIR: where what each call heard is written, as run-<id>.wav. */
  recordDir: string | undefined;
}

export interface SimulatedStreamEvents {
  /** The runtime closed the stream: the simulated call hangs up. */
  runtimeClosed(detail: string): void;
  /** The runtime could not be reached: the simulated call ends failed. */
  runtimeUnreachable(detail: string): void;
  warn(message: string): void;
}

export class SimulatedStream {
  private readonly bridge: MediaStreamBridge;
  private readonly voice: CalleeVoice;
  private readonly recorder: WavRecorder | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the stream opened: the voice's frames and the recording's timeline count from it. */
  private openedAt: number | undefined;
  /** When the voice's current schedule began, and the frames sent on it. */
  private scheduleStart = 0;
  private sentOnSchedule = 0;
  private framesSent = 0;
  private framesHeard = 0;
  private ended = false;

  constructor(
    settings: SimulatorStreaming,
    call: { runId: number; providerCallId: string; orgId: number },
    private readonly clock: Clock,
    events: SimulatedStreamEvents,
  ) {
    this.voice = settings.voice;
    if (settings.recordDir) {
      try {
        mkdirSync(settings.recordDir, { recursive: true });
        this.recorder = new WavRecorder(join(settings.recordDir, `run-${call.runId}.wav`));
      } catch (error) {
        events.warn(`SIMULATOR_STREAM_RECORD_DIR: cannot record this call (${(error as Error).message})`);
      }
    }
    const end = (report: (detail: string) => void) => (detail: string) => {
      this.finish();
      report(detail);
    };
    this.bridge = new MediaStreamBridge(
      { url: settings.runtime.url, customParameters: settings.runtime.parameters(call.runId), ...settings.limits },
      // As for a SIP call: the provider's call id, and the organization as the account.
      { callSid: call.providerCallId, accountSid: String(call.orgId) },
      clock,
      {
        play: (frame, talkspurt) => this.heard(frame, talkspurt),
        runtimeClosed: end((detail) => events.runtimeClosed(detail)),
        runtimeUnreachable: end((detail) => events.runtimeUnreachable(detail)),
        warn: (message) => events.warn(message),
        opened: () => this.speak(),
      },
    );
  }

  /** The callee's frames sent to the runtime, and the runtime's frames played to the callee (for tests and logs). */
  get counts(): { sent: number; heard: number } {
    return { sent: this.framesSent, heard: this.framesHeard };
  }

  /** The simulated callee hung up (its talk time ended), or the call was ended here: `stop`, and the socket closes. */
  stop(): void {
    this.bridge.stop();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.recorder?.close();
  }

  private speak(): void {
    if (this.ended) return;
    this.openedAt = this.clock.now();
    this.scheduleStart = this.openedAt;
    this.tick();
  }

  /** Sends the frames due by now (each frame is due when its 20 ms begin), then waits for the next. */
  private tick(): void {
    this.timer = undefined;
    if (this.ended) return;
    const now = this.clock.now();
    for (let sent = 0; sent < MAX_CATCH_UP && this.scheduleStart + this.sentOnSchedule * FRAME_MS <= now; sent++) {
      this.bridge.inbound(voiceFrame(this.voice, this.framesSent), (this.framesSent * SAMPLES_PER_FRAME) % 2 ** 32);
      this.framesSent += 1;
      this.sentOnSchedule += 1;
    }
    let due = this.scheduleStart + this.sentOnSchedule * FRAME_MS - now;
    if (due <= 0) {
      // Behind by more than MAX_CATCH_UP frames (a stalled event loop): start again from now.
      this.scheduleStart = now;
      this.sentOnSchedule = 0;
      due = 0;
    }
    this.timer = setTimeout(() => this.tick(), due);
  }

  /**
   * A frame the runtime played. A talkspurt's frames follow each other in the recording as they
   * do on the line; the silence before a talkspurt is the time since the stream opened that the
   * recording has not covered yet, so its timeline is the call's.
   */
  private heard(frame: Uint8Array, talkspurt: boolean): void {
    this.framesHeard += 1;
    const recorder = this.recorder;
    if (!recorder || this.ended) return;
    if (talkspurt) recorder.silence(Math.round((this.clock.now() - (this.openedAt ?? this.clock.now())) * (SAMPLES_PER_FRAME / FRAME_MS)) - recorder.length);
    recorder.write(frame);
  }
}
