// The media part's load generator (a process of its own, forked by bench/media-ipc.ts), the far
// end of every call: for the service, a minimal SIP user agent server answering Dialtone's INVITEs
// (the `sip` package's parser and serializer over a UDP socket of its own: 200 OK with a PCMU
// answer on an RTP port of the call's own, the same 200 again for a retransmitted INVITE, 200 to
// BYE); for the floor, one UDP socket per floor stream. On request it plays RTP on a group's calls
// at real time: one 20 ms PCMU packet per call every 20 ms, the calls' packets spread evenly over
// each 20 ms, with sequence numbers and timestamps as RFC 3550 has them (random starts, +1 and
// +160 a packet, the marker on the first packet of each round's talkspurt). Each packet's payload
// is stamped (bench/media-frames.ts); every packet echoed back by the runtime is counted, checked
// (RTP version, sequence, timestamp, SSRC) and its outbound one-way latency read from the
// runtime's stamp.
//
// Requests from the parent:
//   sip                          starts the user agent server; resolves with its port
//   floor {ports}                one call per floor stream, sending to those ports
//   calls                        the service's calls answered (ACKed), ended (BYE) and live
//   play {group, seconds, warmupSeconds, startAt}
//                                plays; resolves once the last packet is sent
//   round {group, end}           the round's counts (with end: all of them, and the round is over)
import { randomInt } from 'node:crypto';
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { createRequire } from 'node:module';
import type * as sip from 'sip';
import { FRAME_BYTES, latencyFigures, nowMs, PACKET_MS, parseRtp, PCMU, readStamp, rtpPacket, stampedFrame } from './media-frames.js';
import { serveMediaRequests } from './media-ipc.js';

const sipLibrary = createRequire(import.meta.url)('sip') as typeof sip;
const ADDRESS = '127.0.0.1';

type Group = 'service' | 'floor';

interface Call {
  index: number;
  group: Group;
  socket: Socket;
  /** Where its RTP goes: the service's SDP offer, or the floor stream's port. */
  remote: { address: string; port: number };
  ssrc: number;
  sequence: number;
  timestamp: number;
  /** When its last packet was sent (nowMs): the timestamp moves on by the silence between rounds. */
  lastSentAt: number | undefined;
  acked: boolean;
  ended: boolean;
  /** The 200 OK sent for its INVITE, sent again when the INVITE is. */
  answer?: string;
  round: RoundOfCall | undefined;
  /** The last echoed packet: the next one must follow it. */
  echo: { sequence: number; timestamp: number; ssrc: number } | undefined;
}

/** What one round of play counted for one call. */
interface RoundOfCall {
  id: number;
  frames: number;
  received: Uint8Array;
}

interface RoundCounts {
  calls: number;
  sent: number;
  received: number;
  duplicates: number;
  /** Echoes of another round's frames, or not stamped by this generator. */
  strays: number;
  /** Packets from an address the call does not send to (symmetric RTP would not take them). */
  foreign: number;
  /** Echoed RTP whose sequence did not go up by one, whose timestamp did not go up by 160 within a talkspurt, or whose SSRC changed. */
  sequenceBreaks: number;
  timestampBreaks: number;
  ssrcChanges: number;
  latencies: number[];
  lateness: number[];
}

const calls: Call[] = [];
const byCallId = new Map<string, Call>();
let rounds = 0;
let counts: Record<Group, RoundCounts> = { service: emptyCounts(), floor: emptyCounts() };

function emptyCounts(): RoundCounts {
  return { calls: 0, sent: 0, received: 0, duplicates: 0, strays: 0, foreign: 0, sequenceBreaks: 0, timestampBreaks: 0, ssrcChanges: 0, latencies: [], lateness: [] };
}

async function newCall(group: Group, remote: { address: string; port: number }): Promise<Call> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, ADDRESS, resolve));
  const call: Call = { index: calls.length, group, socket, remote, ssrc: randomInt(0, 2 ** 32), sequence: randomInt(0, 2 ** 16), timestamp: randomInt(0, 2 ** 32), lastSentAt: undefined, acked: false, ended: false, round: undefined, echo: undefined };
  calls.push(call);
  socket.on('message', (packet, from) => echoed(call, packet, from));
  return call;
}

/** An echoed packet: counted once per frame, checked, and its outbound latency taken. */
function echoed(call: Call, packet: Buffer, from: RemoteInfo): void {
  const at = nowMs();
  const c = counts[call.group];
  if (from.port !== call.remote.port || from.address !== call.remote.address) {
    c.foreign += 1;
    return;
  }
  const rtp = parseRtp(packet);
  const stamp = rtp?.payloadType === PCMU ? readStamp(rtp.payload) : undefined;
  const round = call.round;
  if (!rtp || !stamp || !round || stamp.call !== call.index || stamp.round !== (round.id & 0xff) || stamp.frame >= round.frames) {
    c.strays += 1;
    return;
  }
  if (round.received[stamp.frame]) {
    c.duplicates += 1;
    return;
  }
  round.received[stamp.frame] = 1;
  c.received += 1;
  if (stamp.measured) c.latencies.push(Math.round((at - stamp.echoedAt) * 1000) / 1000);
  const last = call.echo;
  if (last) {
    if (rtp.ssrc !== last.ssrc) c.ssrcChanges += 1;
    else {
      if (rtp.sequence !== ((last.sequence + 1) & 0xffff)) c.sequenceBreaks += 1;
      if (!rtp.marker && rtp.timestamp !== ((last.timestamp + FRAME_BYTES) >>> 0)) c.timestampBreaks += 1;
    }
  }
  call.echo = { sequence: rtp.sequence, timestamp: rtp.timestamp, ssrc: rtp.ssrc };
}

/** Plays `seconds` of audio on every live call of `group`, from `startAt` (nowMs), each call's packets offset by its share of 20 ms; resolves once the last is sent. */
async function play({ group, seconds, warmupSeconds, startAt }: { group: Group; seconds: number; warmupSeconds: number; startAt: number }) {
  const playing = calls.filter((call) => call.group === group && !call.ended && (group === 'floor' || call.acked));
  const frames = Math.round((seconds * 1000) / PACKET_MS);
  const warmupFrames = Math.round((warmupSeconds * 1000) / PACKET_MS);
  const id = ++rounds;
  counts[group] = emptyCounts();
  const c = counts[group];
  for (const call of playing) {
    call.round = { id, frames, received: new Uint8Array(frames) };
    // A new talkspurt: the timestamp moves on by the time since the last packet (RFC 3550 section 5.1).
    if (call.lastSentAt !== undefined) call.timestamp = (call.timestamp + Math.round((startAt - call.lastSentAt) * 8)) >>> 0;
  }
  const n = playing.length;
  const total = frames * n;
  const dueAt = (i: number) => startAt + Math.floor(i / n) * PACKET_MS + ((i % n) * PACKET_MS) / n;
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = nowMs();
      while (next < total && dueAt(next) <= now + 0.5) {
        const call = playing[next % n] as Call;
        const frame = Math.floor(next / n);
        const due = dueAt(next);
        const sentAt = nowMs();
        const payload = stampedFrame({ call: call.index, frame, round: id & 0xff, measured: frame >= warmupFrames, sentAt });
        call.socket.send(rtpPacket({ payloadType: PCMU, marker: frame === 0, sequence: call.sequence, timestamp: call.timestamp, ssrc: call.ssrc }, payload), call.remote.port, call.remote.address);
        call.sequence = (call.sequence + 1) & 0xffff;
        call.timestamp = (call.timestamp + FRAME_BYTES) >>> 0;
        call.lastSentAt = sentAt;
        c.sent += 1;
        if (frame >= warmupFrames) c.lateness.push(Math.round(Math.max(0, sentAt - due) * 1000) / 1000);
        next += 1;
      }
      if (next >= total) return resolve();
      setTimeout(tick, Math.max(0, Math.floor(dueAt(next) - nowMs())));
    };
    setTimeout(tick, Math.max(0, Math.floor(startAt - nowMs())));
  });
  c.calls = n;
  return { calls: n, sent: c.sent };
}

/** The round's counts so far, and with `end` the round is over: what comes after is a stray. */
function roundCounts({ group, end }: { group: Group; end?: boolean }) {
  const c = counts[group];
  if (!end) return { calls: c.calls, sent: c.sent, received: c.received };
  for (const call of calls) if (call.group === group) call.round = undefined;
  counts[group] = emptyCounts();
  const { latencies, lateness, ...rest } = c;
  return { ...rest, latency_ms: latencyFigures(latencies), send_lateness_ms: latencyFigures(lateness), latencies };
}

function closeQuietly(socket: Socket): void {
  try {
    socket.close();
  } catch {
    // Closed already.
  }
}

// The user agent server: what Dialtone's INVITE, ACK and BYE need, nothing more.
let signalling: Socket | undefined;

function sdpAnswer(port: number): string {
  const session = randomInt(1, 2 ** 31);
  return ['v=0', `o=bench ${session} ${session} IN IP4 ${ADDRESS}`, 's=bench', `c=IN IP4 ${ADDRESS}`, 't=0 0', `m=audio ${port} RTP/AVP ${PCMU} 101`, 'a=rtpmap:0 PCMU/8000', 'a=rtpmap:101 telephone-event/8000', 'a=fmtp:101 0-15', 'a=ptime:20', 'a=sendrecv', ''].join('\r\n');
}

/** Where the offer says to send RTP (its c= and m=audio lines). */
function offerTarget(sdp: string): { address: string; port: number } | undefined {
  const address = /^c=IN IP4 (\S+)/m.exec(sdp)?.[1];
  const port = /^m=audio (\d+)/m.exec(sdp)?.[1];
  return address && port ? { address, port: Number(port) } : undefined;
}

async function onSip(data: Buffer, from: RemoteInfo): Promise<void> {
  const socket = signalling;
  const request = sipLibrary.parse(data.toString('utf8'));
  if (!socket || !request?.method) return;
  const reply = (message: sip.SipMessage | string) => socket.send(typeof message === 'string' ? message : sipLibrary.stringify(message), from.port, from.address);
  const callId = request.headers['call-id'] ?? '';
  const known = byCallId.get(callId);
  if (request.method === 'INVITE') {
    if (known?.answer) return reply(known.answer);
    if (known) return; // still binding its port: the retransmission is answered by the first
    const target = offerTarget(typeof request.content === 'string' ? request.content : '');
    if (!target) return reply(sipLibrary.makeResponse(request, 488, 'Not Acceptable Here'));
    const placeholder = { answer: undefined } as unknown as Call;
    byCallId.set(callId, placeholder);
    const call = await newCall('service', target);
    byCallId.set(callId, call);
    const response = sipLibrary.makeResponse(request, 200, 'OK');
    response.headers.to = { ...(request.headers.to ?? { uri: request.uri ?? '' }), params: { ...request.headers.to?.params, tag: `bench${call.index}` } };
    response.headers.contact = [{ uri: `sip:bench@${ADDRESS}:${socket.address().port}`, params: {} }];
    response.headers['content-type'] = 'application/sdp';
    response.content = sdpAnswer(call.socket.address().port);
    call.answer = sipLibrary.stringify(response);
    return reply(call.answer);
  }
  if (request.method === 'ACK') {
    if (known?.answer) known.acked = true;
    return;
  }
  if (request.method === 'BYE' && known?.answer) {
    known.ended = true;
    reply(sipLibrary.makeResponse(request, 200, 'OK'));
    setTimeout(() => closeQuietly(known.socket), 1000);
    return;
  }
  reply(sipLibrary.makeResponse(request, request.method === 'BYE' ? 481 : 405, request.method === 'BYE' ? 'Call/Transaction Does Not Exist' : 'Method Not Allowed'));
}

serveMediaRequests(
  {
    sip: async () => {
      const socket = createSocket('udp4');
      await new Promise<void>((resolve) => socket.bind(0, ADDRESS, resolve));
      socket.on('message', (data, from) => void onSip(data, from));
      signalling = socket;
      return socket.address().port;
    },
    floor: async ({ ports }: { ports: number[] }) => {
      for (const port of ports) await newCall('floor', { address: ADDRESS, port });
      return ports.length;
    },
    calls: () => {
      const service = calls.filter((call) => call.group === 'service');
      return { answered: service.filter((call) => call.acked).length, ended: service.filter((call) => call.ended).length, live: service.filter((call) => call.acked && !call.ended).length };
    },
    play,
    round: roundCounts,
  },
  () => {
    signalling?.close();
    for (const call of calls) closeQuietly(call.socket);
  },
);
