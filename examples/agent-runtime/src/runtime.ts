// The example agent runtime: a WebSocket server (the `ws` package) speaking Twilio's Media Streams
// protocol, which is what Twilio's <Connect><Stream>, Dialtone's SIP calls and Dialtone's simulated
// calls all send (docs/agent-runtime.md, "Getting the call"). For each call it:
//
//   1. takes `run_id` and `token` from the `start` message's customParameters;
//   2. reads its run with the token (GET /api/v1/runtime/runs/{id}): the pinned definition and the
//      template context, from which it renders the start node's greeting;
//   3. plays the greeting (espeak-ng's speech, or a tone prompt) and a mark after it;
//   4. records everything the callee says to recordings/run-<id>.wav, from the start;
//   5. once the mark comes back (the greeting has been heard) listens LISTEN_MS more, then reports
//      a structured result and hangs up, both through the runtime control API.
//
// It is a starting point, not a voice agent: where the comments say "listen", a real runtime would
// run speech recognition and a language model.
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { greetingPrompt, loudness, WavWriter } from './audio.js';
import { DialtoneRuntimeApi, renderTemplate, type RuntimeRun } from './dialtone.js';

export interface RuntimeOptions {
  host?: string;
  /** 0: any free port. */
  port?: number;
  /** Dialtone's base URL (http://127.0.0.1:3000), read when a call starts. */
  dialtoneUrl: string | (() => string);
  /** Where the callee's audio is written, one WAV per run. */
  recordingsDir: string;
  /** How long to listen after the greeting before reporting and hanging up. */
  listenMs: number;
  /** Whether to speak with espeak-ng when it is installed (else the tone prompt). */
  speech: boolean;
  log?: (line: string) => void;
}

/** What the runtime did on one call: logged, and read by the example's test. */
export interface CallRecord {
  runId: number;
  token: string;
  streamSid: string;
  callSid: string;
  /** The callee's 20 ms frames received, and how many were loud (speech, or a simulated callee's tone). */
  framesReceived: number;
  loudFrames: number;
  /** The greeting said: its text, its voice, and its audio (8 kHz μ-law) as sent. */
  greeting: { text: string; voice: 'espeak-ng' | 'tone'; mulaw: Uint8Array } | undefined;
  /** The greeting's mark came back: Dialtone played it all to the callee. */
  greetingPlayed: boolean;
  recording: string;
  result: Record<string, unknown> | undefined;
  /** How the call ended for the runtime: its own hang-up, or Dialtone's `stop` (the callee hung up). */
  end: 'hung_up' | 'stopped' | 'closed' | undefined;
  errors: string[];
}

export interface AgentRuntime {
  /** The WebSocket URL to give Dialtone as AGENT_RUNTIME_URL. */
  url: string;
  calls: CallRecord[];
  close(): Promise<void>;
}

/** Greeting audio goes out in messages of a second each (any size works; Dialtone paces it out). */
const CHUNK_BYTES = 8000;
/** A frame louder than this (mean absolute amplitude) counts as the callee speaking. */
const LOUD = 500;

export async function startAgentRuntime(options: RuntimeOptions): Promise<AgentRuntime> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  mkdirSync(options.recordingsDir, { recursive: true });
  const server = new WebSocketServer({ host: options.host ?? '127.0.0.1', port: options.port ?? 8765 });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const calls: CallRecord[] = [];
  server.on('connection', (socket) => new Call(socket, options, log, calls));
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `ws://${address}:${port}/media`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate();
        server.close(() => resolve());
      }),
  };
}

interface StreamMessage {
  event?: string;
  streamSid?: string;
  start?: { streamSid?: string; callSid?: string; customParameters?: Record<string, string> };
  media?: { payload?: string };
  mark?: { name?: string };
}

class Call {
  private record: CallRecord | undefined;
  private api: DialtoneRuntimeApi | undefined;
  private wav: WavWriter | undefined;
  private listenTimer: ReturnType<typeof setTimeout> | undefined;
  private finished = false;
  /** Set before the hang-up is asked: Dialtone's `stop` may arrive before its answer does. */
  private hangingUp = false;

  constructor(
    private readonly socket: WebSocket,
    private readonly options: RuntimeOptions,
    private readonly log: (line: string) => void,
    private readonly calls: CallRecord[],
  ) {
    socket.on('message', (data, isBinary) => {
      if (isBinary) return;
      let message: StreamMessage;
      try {
        message = JSON.parse(data.toString()) as StreamMessage;
      } catch {
        return;
      }
      this.receive(message);
    });
    socket.on('close', () => this.closed());
  }

  private receive(message: StreamMessage): void {
    switch (message.event) {
      case 'start':
        this.start(message);
        break;
      case 'media':
        if (this.record && message.media?.payload) {
          const audio = Buffer.from(message.media.payload, 'base64');
          this.wav?.writeMulaw(audio);
          this.record.framesReceived += 1;
          if (loudness(audio) > LOUD) this.record.loudFrames += 1;
        }
        break;
      case 'mark':
        if (message.mark?.name === 'greeting' && this.record) {
          this.record.greetingPlayed = true;
          this.log(`run ${this.record.runId}: greeting played; listening ${this.options.listenMs} ms`);
          // Listen: a real runtime would transcribe here and answer turn by turn.
          this.listenTimer = setTimeout(() => void this.finish(), this.options.listenMs);
        }
        break;
      case 'stop':
        if (this.record) this.record.end ??= this.hangingUp ? 'hung_up' : 'stopped';
        this.stopRecording();
        break;
      default:
        break; // `connected`, `dtmf`: nothing to do in this example
    }
  }

  private start(message: StreamMessage): void {
    const parameters = message.start?.customParameters ?? {};
    const runId = Number(parameters.run_id);
    const token = parameters.token;
    if (!Number.isSafeInteger(runId) || !token) {
      this.log('a stream without run_id and token in its customParameters: closed');
      this.socket.close(1008, 'run_id and token expected');
      return;
    }
    const recording = join(this.options.recordingsDir, `run-${runId}.wav`);
    this.record = {
      runId,
      token,
      streamSid: message.start?.streamSid ?? message.streamSid ?? '',
      callSid: message.start?.callSid ?? '',
      framesReceived: 0,
      loudFrames: 0,
      greeting: undefined,
      greetingPlayed: false,
      recording,
      result: undefined,
      end: undefined,
      errors: [],
    };
    this.calls.push(this.record);
    this.wav = new WavWriter(recording);
    const base = typeof this.options.dialtoneUrl === 'function' ? this.options.dialtoneUrl() : this.options.dialtoneUrl;
    this.api = new DialtoneRuntimeApi(base, runId, token);
    this.log(`run ${runId}: call ${this.record.callSid} started; recording to ${recording}`);
    void this.greet(this.api, this.record);
  }

  /** Reads the run, renders the start node's greeting, and plays it with a mark after it. */
  private async greet(api: DialtoneRuntimeApi, record: CallRecord): Promise<void> {
    let run: RuntimeRun;
    try {
      run = await api.run();
    } catch (error) {
      this.fail(record, `reading the run: ${(error as Error).message}`);
      this.socket.close(1011, 'could not read the run');
      return;
    }
    const startNode = run.definition.nodes?.find((node) => node.type === 'start');
    const template = typeof startNode?.data?.greeting === 'string' ? startNode.data.greeting : 'Hello.';
    const text = renderTemplate(template, run.context);
    const prompt = greetingPrompt(text, this.options.speech);
    record.greeting = { text, voice: prompt.voice, mulaw: prompt.mulaw };
    this.log(`run ${record.runId}: saying "${text}" (${prompt.voice}, ${(prompt.mulaw.length / 8000).toFixed(1)} s)`);
    for (let offset = 0; offset < prompt.mulaw.length; offset += CHUNK_BYTES) {
      this.send({ event: 'media', streamSid: record.streamSid, media: { payload: Buffer.from(prompt.mulaw.subarray(offset, offset + CHUNK_BYTES)).toString('base64') } });
    }
    this.send({ event: 'mark', streamSid: record.streamSid, mark: { name: 'greeting' } });
  }

  /** Reports what the call concluded, then hangs up: both through Dialtone's runtime control API. */
  private async finish(): Promise<void> {
    const { record, api } = this;
    if (!record || !api || this.finished) return;
    this.finished = true;
    const result = {
      outcome: 'listened',
      greeting_voice: record.greeting?.voice ?? 'tone',
      heard_speech_ms: record.loudFrames * 20,
      recording_seconds: Math.round((this.wav?.seconds ?? 0) * 10) / 10,
    };
    try {
      await api.event('agent.recording_ready', { path: record.recording });
      await api.result(result);
      record.result = result;
      this.log(`run ${record.runId}: result reported ${JSON.stringify(result)}`);
    } catch (error) {
      // A definition whose result_schema refuses this shape answers 422: said, and the call still ends.
      this.fail(record, `reporting the result: ${(error as Error).message}`);
    }
    try {
      this.hangingUp = true;
      await api.hangUp('example runtime: done');
      record.end ??= 'hung_up';
      this.log(`run ${record.runId}: hung up`);
    } catch (error) {
      this.fail(record, `hanging up: ${(error as Error).message}`);
      this.socket.close(1000, 'done');
    }
  }

  private fail(record: CallRecord, message: string): void {
    record.errors.push(message);
    this.log(`run ${record.runId}: ${message}`);
  }

  private send(message: Record<string, unknown>): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(message));
  }

  private stopRecording(): void {
    if (this.listenTimer) clearTimeout(this.listenTimer);
    this.listenTimer = undefined;
    this.wav?.close();
  }

  private closed(): void {
    if (this.record) {
      this.record.end ??= 'closed';
      this.log(`run ${this.record.runId}: stream closed; ${this.record.framesReceived} frames of the callee recorded`);
    }
    this.stopRecording();
  }
}
