// The media part's agent runtime (a process of its own, forked by bench/media-ipc.ts): a WebSocket
// server speaking the runtime's side of Twilio's Media Streams, as any runtime written for Twilio
// would, that echoes every `media` frame it gets straight back on the same stream, with its own
// send time stamped in (bench/media-frames.ts). It counts what each stream brought and reads the
// inbound one-way latency (generator → bridge or floor → here) from the generator's stamps.
//
// Streams whose callSid starts with `floor-` are the floor's (bench/media-floor.ts); the others are
// the service's calls. Requests from the parent:
//   streams         how many streams of each group have sent `start` (and `stop`)
//   take {group}    the group's counts and latencies since the last take, then zeroed
//   close {group}   closes the group's sockets (1000): the service hangs its calls up
import { WebSocketServer, type WebSocket } from 'ws';
import { latencyFigures, nowMs, readStamp, stampEcho } from './media-frames.js';
import { serveMediaRequests } from './media-ipc.js';

type Group = 'service' | 'floor';

interface Stream {
  socket: WebSocket;
  group: Group;
  streamSid: string;
  /** The last frame index seen per call stamped in it: one that does not go up is out of order or repeated. */
  lastFrame: number;
}

interface Counts {
  /** `media` messages received, echoed, and received out of order or again. */
  received: number;
  echoed: number;
  outOfOrder: number;
  /** Messages that are not JSON or not Media Streams' (a bridge sending something else). */
  unreadable: number;
  /** Inbound one-way latency of each measured frame, ms. */
  latencies: number[];
}

const emptyCounts = (): Counts => ({ received: 0, echoed: 0, outOfOrder: 0, unreadable: 0, latencies: [] });
const counts: Record<Group, Counts> = { service: emptyCounts(), floor: emptyCounts() };
const started: Record<Group, number> = { service: 0, floor: 0 };
const stopped: Record<Group, number> = { service: 0, floor: 0 };
const streams = new Set<Stream>();

interface Inbound {
  event?: string;
  streamSid?: string;
  start?: { callSid?: string; streamSid?: string };
  media?: { payload?: string };
}

function receive(socket: WebSocket, state: { stream: Stream | undefined }, text: string, at: number): void {
  let message: Inbound;
  try {
    message = JSON.parse(text) as Inbound;
  } catch {
    counts[state.stream?.group ?? 'service'].unreadable += 1;
    return;
  }
  if (message.event === 'start') {
    const group: Group = message.start?.callSid?.startsWith('floor-') ? 'floor' : 'service';
    state.stream = { socket, group, streamSid: message.start?.streamSid ?? message.streamSid ?? '', lastFrame: -1 };
    streams.add(state.stream);
    started[group] += 1;
    return;
  }
  const stream = state.stream;
  if (!stream) return;
  if (message.event === 'stop') {
    stopped[stream.group] += 1;
    return;
  }
  if (message.event !== 'media') return;
  const c = counts[stream.group];
  const payload = Buffer.from(message.media?.payload ?? '', 'base64');
  const stamp = readStamp(payload);
  if (!stamp) {
    c.unreadable += 1;
    return;
  }
  c.received += 1;
  if (stamp.frame <= stream.lastFrame) c.outOfOrder += 1;
  stream.lastFrame = stamp.frame;
  if (stamp.measured) c.latencies.push(Math.round((at - stamp.sentAt) * 1000) / 1000);
  stampEcho(payload, nowMs());
  // What a runtime sends back (Twilio's documented shape): the stream id and the payload.
  socket.send(`{"event":"media","streamSid":"${stream.streamSid}","media":{"payload":"${payload.toString('base64')}"}}`);
  c.echoed += 1;
}

const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
server.on('connection', (socket) => {
  const state: { stream: Stream | undefined } = { stream: undefined };
  socket.on('message', (data, isBinary) => {
    const at = nowMs();
    if (!isBinary) receive(socket, state, data.toString(), at);
  });
  socket.on('close', () => {
    if (state.stream) streams.delete(state.stream);
  });
});
await new Promise<void>((resolve) => server.once('listening', resolve));
const address = server.address();
const url = `ws://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

serveMediaRequests(
  {
    url: () => url,
    streams: () => ({ started, stopped, open: { service: [...streams].filter((s) => s.group === 'service').length, floor: [...streams].filter((s) => s.group === 'floor').length } }),
    take: ({ group }: { group: Group }) => {
      const taken = counts[group];
      counts[group] = emptyCounts();
      const { latencies, ...rest } = taken;
      return { ...rest, latency_ms: latencyFigures(latencies), latencies };
    },
    close: ({ group }: { group: Group }) => {
      let closed = 0;
      for (const stream of streams) {
        if (stream.group !== group) continue;
        stream.socket.close(1000, 'bench over');
        closed += 1;
      }
      return closed;
    },
  },
  () => server.close(),
);
