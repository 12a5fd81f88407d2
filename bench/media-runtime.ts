// The media part's agent runtime (a process of its own, forked by bench/media-ipc.ts): a WebSocket
// server speaking the runtime's side of Twilio's Media Streams, as any runtime written for Twilio
// would, that echoes every `media` frame it gets straight back on the same stream, with its own
// send time stamped in (bench/media-frames.ts). It counts what each stream brought and reads the
// inbound one-way latency (generator → bridge or floor → here) from the generator's stamps.
//
// Streams whose callSid starts with `floor-` are the floor's (bench/media-floor.ts); the others are
// the service's calls. Requests from the parent:
//   streams         how many streams of each group have sent `start` (and `stop`)
//   received {group}  how many media frames the group has brought since the last take
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
  /** The last frame seen (its round and index): within a round, one whose index does not go up is out of order or repeated. */
  last: { round: number; frame: number };
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

/** A `media` message's payload, read without parsing the whole message; undefined for any other message. */
function mediaPayload(text: string): string | undefined {
  if (!text.startsWith('{"event":"media"')) return undefined;
  const from = text.indexOf('"payload":"');
  const to = from < 0 ? -1 : text.indexOf('"', from + 11);
  return to < 0 ? undefined : text.slice(from + 11, to);
}

function receive(socket: WebSocket, state: { stream: Stream | undefined }, text: string, at: number): void {
  // The bridge's and the floor's media messages begin with their event (as JSON.stringify writes
  // them), so their payload is cut out rather than parsed: at 200 calls this process reads 10,000
  // messages a second, and its own delay would count as the bridge's latency. Every other message
  // (and a media message written otherwise) is parsed.
  const payloadText = state.stream ? mediaPayload(text) : undefined;
  if (payloadText !== undefined && state.stream) return echo(socket, state.stream, payloadText, at);
  let message: Inbound;
  try {
    message = JSON.parse(text) as Inbound;
  } catch {
    counts[state.stream?.group ?? 'service'].unreadable += 1;
    return;
  }
  if (message.event === 'start') {
    const group: Group = message.start?.callSid?.startsWith('floor-') ? 'floor' : 'service';
    state.stream = { socket, group, streamSid: message.start?.streamSid ?? message.streamSid ?? '', last: { round: -1, frame: -1 } };
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
  if (message.event === 'media') echo(socket, stream, message.media?.payload ?? '', at);
}

/** Counts a media frame, reads its inbound latency and sends it back with the echo's time stamped in. */
function echo(socket: WebSocket, stream: Stream, base64: string, at: number): void {
  const c = counts[stream.group];
  const payload = Buffer.from(base64, 'base64');
  const stamp = readStamp(payload);
  if (!stamp) {
    c.unreadable += 1;
    return;
  }
  c.received += 1;
  if (stamp.round === stream.last.round && stamp.frame <= stream.last.frame) c.outOfOrder += 1;
  stream.last = { round: stamp.round, frame: stamp.frame };
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
    received: ({ group }: { group: Group }) => counts[group].received,
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
