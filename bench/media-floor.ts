// The media part's floor (a process of its own, forked by bench/media-ipc.ts): the least a process
// can do to carry the same packets as Dialtone's bridge, for the same number of streams, with no
// Dialtone code. Per stream, a bare UDP relay (a socket of its own receiving the generator's RTP,
// latching onto its source as Dialtone does, and sending back RTP with its own sequence numbers and
// timestamps) joined to a bare WebSocket relay (a client of the runtime sending the same Media
// Streams messages as the bridge: `connected`, `start`, then one `media` per packet, and turning
// each `media` the runtime sends into one packet at once). No pacing, no jitter buffer, no
// validation beyond JSON.parse: what the bridge spends beyond this is what it adds.
//
// Requests from the parent:
//   open {streams, runtimeUrl}   binds the sockets and connects the streams; resolves with the UDP ports
import { randomInt } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import WebSocket from 'ws';
import { FRAME_BYTES, PCMU, rtpPacket } from './media-frames.js';
import { serveMediaRequests } from './media-ipc.js';

/** The UDP half: RTP in from the latched source, RTP out to it. */
class UdpRelay {
  private remote: { address: string; port: number } | undefined;
  private readonly ssrc = randomInt(0, 2 ** 32);
  private sequence = randomInt(0, 2 ** 16);
  private timestamp = randomInt(0, 2 ** 32);
  private first = true;

  constructor(
    readonly socket: Socket,
    onPayload: (payload: Buffer, rtpTimestamp: number) => void,
  ) {
    socket.on('message', (packet, from) => {
      if (packet.length < 12 + FRAME_BYTES) return;
      this.remote ??= { address: from.address, port: from.port };
      onPayload(packet.subarray(12), packet.readUInt32BE(4));
    });
  }

  send(payload: Buffer): void {
    if (!this.remote) return;
    this.socket.send(rtpPacket({ payloadType: PCMU, marker: this.first, sequence: this.sequence, timestamp: this.timestamp, ssrc: this.ssrc }, payload), this.remote.port, this.remote.address);
    this.first = false;
    this.sequence = (this.sequence + 1) & 0xffff;
    this.timestamp = (this.timestamp + FRAME_BYTES) >>> 0;
  }
}

/** The WebSocket half: Media Streams messages out, the runtime's `media` payloads in. */
class WebSocketRelay {
  private sequence = 0;
  private chunk = 0;
  private firstTimestamp: number | undefined;
  readonly opened: Promise<void>;

  constructor(
    private readonly socket: WebSocket,
    private readonly streamSid: string,
    callSid: string,
    onPayload: (payload: Buffer) => void,
  ) {
    this.opened = new Promise((resolve, reject) => {
      socket.once('open', () => {
        socket.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
        socket.send(
          JSON.stringify({
            event: 'start',
            sequenceNumber: String(++this.sequence),
            start: { streamSid, accountSid: 'floor', callSid, tracks: ['inbound'], customParameters: {}, mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
            streamSid,
          }),
        );
        resolve();
      });
      socket.once('error', reject);
    });
    socket.on('message', (data, isBinary) => {
      if (isBinary) return;
      const message = JSON.parse(data.toString()) as { event?: string; media?: { payload?: string } };
      if (message.event === 'media' && message.media?.payload) onPayload(Buffer.from(message.media.payload, 'base64'));
    });
  }

  media(payload: Buffer, rtpTimestamp: number): void {
    this.firstTimestamp ??= rtpTimestamp;
    const ms = Math.round((((rtpTimestamp - this.firstTimestamp) >>> 0) / 8));
    this.socket.send(
      `{"event":"media","sequenceNumber":"${++this.sequence}","media":{"track":"inbound","chunk":"${++this.chunk}","timestamp":"${ms}","payload":"${payload.toString('base64')}"},"streamSid":"${this.streamSid}"}`,
    );
  }
}

const sockets: { udp: Socket; ws: WebSocket }[] = [];

async function openStream(index: number, runtimeUrl: string): Promise<number> {
  const udp = createSocket('udp4');
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  const ws = new WebSocket(runtimeUrl, { perMessageDeflate: false });
  sockets.push({ udp, ws });
  let relayWs: WebSocketRelay | undefined;
  const relayUdp = new UdpRelay(udp, (payload, timestamp) => relayWs?.media(payload, timestamp));
  relayWs = new WebSocketRelay(ws, `MZfloor${String(index).padStart(26, '0')}`, `floor-${index}`, (payload) => relayUdp.send(payload));
  await relayWs.opened;
  return udp.address().port;
}

serveMediaRequests(
  {
    open: async ({ streams, runtimeUrl }: { streams: number; runtimeUrl: string }) => {
      const ports: number[] = [];
      for (let i = 0; i < streams; i++) ports.push(await openStream(i, runtimeUrl));
      return ports;
    },
  },
  () => {
    for (const { udp, ws } of sockets) {
      udp.close();
      ws.terminate();
    }
  },
);
