// The peers of `npm run bench`'s media part (bench/parts/media.ts), so that they cannot rot between
// bench runs: the load generator, the echoing runtime and the floor's relays, as child processes
// driven the way the part drives them. No store is involved (the part runs the service on the
// embedded default; these peers never touch a database), so there is no per-store loop here.
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createRequire } from 'node:module';
import { after, describe, it } from 'node:test';
import type * as sip from 'sip';
import { nowMs, parseRtp, PCMU, readStamp } from '../bench/media-frames.js';
import { forkMediaChild, type MediaChild } from '../bench/media-ipc.js';
import { finishRound } from '../bench/media-round.js';
import { scaledTimeout } from './helpers/timeouts.js';

const sipLibrary = createRequire(import.meta.url)('sip') as typeof sip;

const children: MediaChild[] = [];
const start = (script: string) => {
  const child = forkMediaChild(script, {});
  children.push(child);
  return child;
};
after(() => Promise.all(children.map((child) => child.stop())));

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + scaledTimeout(10_000);
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('The media bench part\'s peers (bench/media-*.ts)', () => {
  it('carries every frame both ways through the floor\'s relays: the generator\'s RTP reaches the runtime as Media Streams media, its echo comes back as RTP in sequence, each counted once with its latency', async () => {
    const runtime = start('./media-runtime.ts');
    const generator = start('./media-generator.ts');
    const floor = start('./media-floor.ts');
    const url = await runtime.call<string>('url');
    const ports = await floor.call<number[]>('open', { streams: 2, runtimeUrl: url });
    assert.equal(ports.length, 2);
    await generator.call('floor', { ports });
    await until('floor streams started', () => runtime.call<{ started: { floor: number } }>('streams'), (s) => s.started.floor === 2);

    // 0.2 s on each of the 2 streams: 10 frames each, the first 5 of them warm-up (not timed).
    const { sent } = await generator.call<{ sent: number }>('play', { group: 'floor', seconds: 0.2, warmupSeconds: 0.1, startAt: nowMs() + 50 });
    const { atGenerator: played, atRuntime } = await finishRound(generator, runtime, 'floor', sent);
    assert.equal(played.calls, 2);
    assert.equal(played.sent, 20);
    assert.deepEqual({ received: atRuntime.received, echoed: atRuntime.echoed, outOfOrder: atRuntime.outOfOrder, unreadable: atRuntime.unreadable }, { received: 20, echoed: 20, outOfOrder: 0, unreadable: 0 });
    assert.deepEqual(
      { received: played.received, duplicates: played.duplicates, strays: played.strays, foreign: played.foreign, sequenceBreaks: played.sequenceBreaks, timestampBreaks: played.timestampBreaks, ssrcChanges: played.ssrcChanges },
      { received: 20, duplicates: 0, strays: 0, foreign: 0, sequenceBreaks: 0, timestampBreaks: 0, ssrcChanges: 0 },
    );
    // Latency only for the frames after the warm-up, each a real one-way time on the machine's one clock.
    assert.equal(atRuntime.latency_ms.samples, 10);
    assert.equal(played.latency_ms.samples, 10);
    for (const p99 of [atRuntime.latency_ms.p99, played.latency_ms.p99]) assert.ok(p99 > 0 && p99 < scaledTimeout(1000), `a one-way latency of ${p99} ms`);

    // A second round counts afresh: nothing of the first is counted again.
    const next = await generator.call<{ sent: number }>('play', { group: 'floor', seconds: 0.1, warmupSeconds: 0, startAt: nowMs() + 20 });
    const { atGenerator: again, atRuntime: second } = await finishRound(generator, runtime, 'floor', next.sent);
    assert.deepEqual([again.sent, again.received, again.strays, again.sequenceBreaks], [10, 10, 0, 0]);
    assert.deepEqual([second.received, second.outOfOrder], [10, 0], 'a new round\'s frames count from 0 again, in order');
  });

  it('answers an INVITE as the callee (200 OK with a PCMU answer on an RTP port of the call\'s own, the same 200 for a retransmission), plays stamped RTP to the offer\'s address once ACKed, and answers BYE', async () => {
    const generator = start('./media-generator.ts');
    const port = await generator.call<number>('sip');
    const uac = createSocket('udp4');
    const rtp = createSocket('udp4');
    await new Promise<void>((resolve) => uac.bind(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => rtp.bind(0, '127.0.0.1', resolve));
    const responses: sip.SipMessage[] = [];
    uac.on('message', (data) => responses.push(sipLibrary.parse(data.toString()) as sip.SipMessage));
    const packets: Buffer[] = [];
    rtp.on('message', (data) => packets.push(data));
    after(() => {
      uac.close();
      rtp.close();
    });
    const uri = `sip:+12025550123@127.0.0.1:${port}`;
    const headers = (method: string, seq: number): sip.SipHeaders => ({
      via: [{ version: '2.0', protocol: 'UDP', host: '127.0.0.1', port: uac.address().port, params: { branch: `z9hG4bK${method}${seq}` } }],
      to: { uri, params: method === 'INVITE' ? {} : { tag: 'bench0' } },
      from: { uri: 'sip:dialtone@127.0.0.1', params: { tag: 'uac' } },
      'call-id': 'bench-test-call',
      cseq: { method, seq },
      'max-forwards': 70,
    });
    const send = (message: sip.SipMessage) => uac.send(sipLibrary.stringify(message), port, '127.0.0.1');
    const offer = ['v=0', 'o=t 1 1 IN IP4 127.0.0.1', 's=t', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${rtp.address().port} RTP/AVP 0 8 101`, ''].join('\r\n');
    const invite: sip.SipMessage = { method: 'INVITE', uri, headers: { ...headers('INVITE', 1), 'content-type': 'application/sdp' }, content: offer };
    send(invite);
    await until('the 200 OK', async () => responses.length, (n) => n === 1);
    send(invite);
    await until('the same 200 OK again', async () => responses.length, (n) => n === 2);
    const [ok, again] = responses as [sip.SipMessage, sip.SipMessage];
    assert.equal(ok.status, 200);
    assert.equal(sipLibrary.stringify(again), sipLibrary.stringify(ok), 'a retransmitted INVITE gets the same answer');
    assert.equal(ok.headers.to?.params.tag, 'bench0');
    const answerPort = Number(/^m=audio (\d+) RTP\/AVP 0 101/m.exec(ok.content ?? '')?.[1]);
    assert.ok(answerPort > 0 && answerPort !== port, ok.content);

    assert.equal((await generator.call<{ answered: number }>('calls')).answered, 0, 'not answered before the ACK');
    send({ method: 'ACK', uri, headers: headers('ACK', 1) });
    await until('the call ACKed', () => generator.call<{ answered: number; live: number }>('calls'), (c) => c.answered === 1 && c.live === 1);

    // Nothing echoes here: the packets are only checked as they arrive at the offer's address.
    const played = await generator.call<{ sent: number }>('play', { group: 'service', seconds: 0.1, warmupSeconds: 0, startAt: nowMs() + 20 });
    assert.equal(played.sent, 5);
    await until('5 RTP packets', async () => packets.length, (n) => n === 5);
    const parsed = packets.map((packet) => parseRtp(packet));
    parsed.forEach((p, i) => {
      assert.ok(p);
      assert.equal(p.payloadType, PCMU);
      assert.equal(p.marker, i === 0, 'the marker on the talkspurt\'s first packet only');
      assert.equal(p.sequence, ((parsed[0]?.sequence ?? 0) + i) & 0xffff);
      assert.equal(p.timestamp, ((parsed[0]?.timestamp ?? 0) + 160 * i) >>> 0);
      assert.equal(p.ssrc, parsed[0]?.ssrc);
      assert.equal(p.payload.length, 160);
      assert.equal(readStamp(p.payload)?.frame, i);
    });

    send({ method: 'BYE', uri, headers: headers('BYE', 2) });
    await until('the 200 to BYE', async () => responses.length, (n) => n === 3);
    assert.equal(responses[2]?.status, 200);
    assert.equal(responses[2]?.headers.cseq?.method, 'BYE');
    assert.deepEqual(await generator.call('calls'), { answered: 1, ended: 1, live: 0 });
  });
});
