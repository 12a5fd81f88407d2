// What the SIP provider makes of a transfer's NOTIFYs and of DTMF digits, without a network: the
// sipfrag status line, the result each final status means, the wait for the final NOTIFY (on
// node:test's mock timers), the Refer-To of a target, and the order and pauses of digits.
import assert from 'node:assert/strict';
import type * as sip from 'sip';
import { DTMF_PAUSE_MS, dtmfRelayBody, playDigits } from '../src/telephony/sip/dtmf-info.js';
import { isReferNotify, referToUri, sipfragStatus, TransferWatch, transferResultOf } from '../src/telephony/sip/refer.js';
import { describe, it } from './helpers/suite.js';

const notify = (body: string, state = 'active;expires=60', event = 'refer'): sip.SipMessage => ({
  method: 'NOTIFY',
  headers: { event, 'subscription-state': state, 'content-type': 'message/sipfrag;version=2.0' },
  content: body,
});

function watch(timeoutMs = 5_000) {
  const reported: { result: string; raw: string }[] = [];
  return { reported, watch: new TransferWatch(timeoutMs, (result, raw) => reported.push({ result, raw })) };
}

describe('SIP transfer: NOTIFY sipfrag', () => {
  it('reads the status line of a sipfrag body, and nothing from a body without one', () => {
    assert.deepEqual(sipfragStatus('SIP/2.0 180 Ringing\r\n'), { status: 180, line: '180 Ringing' });
    assert.deepEqual(sipfragStatus('SIP/2.0 486 Busy Here\r\nContent-Length: 0\r\n'), { status: 486, line: '486 Busy Here' });
    assert.equal(sipfragStatus(''), undefined);
    assert.equal(sipfragStatus('INVITE sip:x@y SIP/2.0'), undefined);
  });

  it('maps final statuses: 2xx answered, 486/600 busy, 408/480/487 no_answer, anything else failed', () => {
    const cases: [number, string][] = [[200, 'answered'], [202, 'answered'], [486, 'busy'], [600, 'busy'], [408, 'no_answer'], [480, 'no_answer'], [487, 'no_answer'], [603, 'failed'], [404, 'failed'], [503, 'failed']];
    for (const [status, result] of cases) assert.equal(transferResultOf(status), result, String(status));
  });

  it('takes NOTIFYs of the refer event package only', () => {
    assert.equal(isReferNotify(notify('')), true);
    assert.equal(isReferNotify(notify('', 'active', 'refer;id=3')), true);
    assert.equal(isReferNotify(notify('', 'active', 'presence')), false);
  });

  it('reports progress as nothing, then the final status once, with its status line', () => {
    const { reported, watch: w } = watch();
    w.accept();
    w.notify(notify('SIP/2.0 100 Trying'));
    w.notify(notify('SIP/2.0 180 Ringing'));
    assert.deepEqual(reported, []);
    w.notify(notify('SIP/2.0 486 Busy Here', 'terminated;reason=noresource'));
    w.notify(notify('SIP/2.0 200 OK', 'terminated'));
    assert.deepEqual(reported, [{ result: 'busy', raw: '486 Busy Here' }]);
  });

  it('reports failed when the subscription ends without a final status', () => {
    const { reported, watch: w } = watch();
    w.accept();
    w.notify(notify('SIP/2.0 100 Trying', 'terminated;reason=timeout'));
    assert.deepEqual(reported, [{ result: 'failed', raw: 'Subscription terminated at 100 Trying' }]);
  });

  it('holds a final NOTIFY that overtook the REFER\'s 202 until the REFER is accepted, and drops it when the REFER is refused', () => {
    const early = watch();
    early.watch.notify(notify('SIP/2.0 200 OK', 'terminated'));
    assert.deepEqual(early.reported, []);
    early.watch.accept();
    assert.deepEqual(early.reported, [{ result: 'answered', raw: '200 OK' }]);
    const refused = watch();
    refused.watch.notify(notify('SIP/2.0 200 OK', 'terminated'));
    refused.watch.abandon();
    refused.watch.accept();
    assert.deepEqual(refused.reported, []);
  });

  it('reports failed when no final NOTIFY comes within its timeout after the acceptance, and only then', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { reported, watch: w } = watch(45_000);
    w.accept();
    w.notify(notify('SIP/2.0 180 Ringing'));
    t.mock.timers.tick(44_999);
    assert.deepEqual(reported, []);
    t.mock.timers.tick(1);
    assert.deepEqual(reported, [{ result: 'failed', raw: 'No final NOTIFY within 45000 ms' }]);
    w.notify(notify('SIP/2.0 200 OK', 'terminated'));
    assert.equal(reported.length, 1, 'a final NOTIFY after the timeout changes nothing');
  });

  it('writes an E.164 target at the trunk, a SIP URI as given, and refuses what could break the header', () => {
    const trunk = { host: 'sip.carrier.example', port: 5061 };
    assert.equal(referToUri('+442071838750', trunk), 'sip:+442071838750@sip.carrier.example:5061');
    assert.equal(referToUri('sips:desk@pbx.example.com;transport=tls', trunk), 'sips:desk@pbx.example.com;transport=tls');
    for (const bad of ['442071838750', 'tel:+442071838750', 'sip:a@b>', 'sip:a@b\r\nX-Evil: 1', 'sip:a b@c']) assert.throws(() => referToUri(bad, trunk), RangeError, bad);
  });
});

describe('SIP DTMF by INFO', () => {
  it('sends one digit at a time, in order, each after the last was accepted, and pauses half a second for each w', async () => {
    const steps: string[] = [];
    let inFlight = 0;
    await playDigits(
      '12w*#wwA',
      async (digit) => {
        assert.equal(inFlight, 0, 'one INFO at a time');
        inFlight += 1;
        await new Promise((resolve) => setImmediate(resolve));
        steps.push(digit);
        inFlight -= 1;
      },
      async (ms) => void steps.push(`pause ${ms}`),
    );
    assert.equal(DTMF_PAUSE_MS, 500);
    assert.deepEqual(steps, ['1', '2', 'pause 500', '*', '#', 'pause 500', 'pause 500', 'A']);
  });

  it('stops at the first digit the far end refuses', async () => {
    const sent: string[] = [];
    await assert.rejects(
      playDigits(
        '123',
        async (digit) => {
          if (digit === '2') throw new Error('501 Not Implemented');
          sent.push(digit);
        },
        async () => undefined,
      ),
      /501/,
    );
    assert.deepEqual(sent, ['1']);
  });

  it('refuses digits outside 0-9, *, #, A-D and w before sending any', async () => {
    for (const bad of ['', '12x', '1 2', 'a', 'E']) {
      const sent: string[] = [];
      await assert.rejects(playDigits(bad, async (digit) => void sent.push(digit), async () => undefined), RangeError, bad);
      assert.deepEqual(sent, []);
    }
  });

  it('writes the application/dtmf-relay body with the signal and its duration', () => {
    assert.equal(dtmfRelayBody('#'), 'Signal=#\r\nDuration=160\r\n');
  });
});
