// Our webhook headers verify with the `standardwebhooks` package — another implementation of the
// specification than ours — with one secret and with two during a rotation.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { newWebhookSecret, signatureHeader, webhookHeaders } from '../src/webhooks/signature.js';

const body = JSON.stringify({ type: 'run.ended', timestamp: '2025-01-01T00:00:00Z', data: { run: { id: 'run_1', note: 'ünïcödé ☎' } } });
const now = () => Math.floor(Date.now() / 1000);

describe('newWebhookSecret', () => {
  it('is whsec_ and the base64 of 32 random bytes, different every time', () => {
    const a = newWebhookSecret();
    const b = newWebhookSecret();
    assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(a.slice(6), 'base64').length, 32);
    assert.notEqual(a, b);
  });
});

describe('webhookHeaders', () => {
  it('verifies with standardwebhooks and carries the id, timestamp, content type and user agent', () => {
    const secret = newWebhookSecret();
    const ts = now();
    const headers = webhookHeaders({ msgId: 'msg_1', timestampSeconds: ts, body, secrets: [secret], version: '0.1.0' });
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    assert.equal(headers['webhook-id'], 'msg_1');
    assert.equal(headers['webhook-timestamp'], String(ts));
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers['user-agent'], 'Dialtone/0.1.0');
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
  });

  it('signs with both secrets during a rotation, and each verifies on its own', () => {
    const [oldSecret, newSecret] = [newWebhookSecret(), newWebhookSecret()];
    const headers = webhookHeaders({ msgId: 'msg_2', timestampSeconds: now(), body, secrets: [newSecret, oldSecret], version: '0.1.0' });
    assert.equal(headers['webhook-signature'].split(' ').length, 2);
    assert.doesNotThrow(() => new Webhook(oldSecret).verify(body, headers));
    assert.doesNotThrow(() => new Webhook(newSecret).verify(body, headers));
  });

  it('does not verify with another secret, another body or another id', () => {
    const secret = newWebhookSecret();
    const headers = webhookHeaders({ msgId: 'msg_3', timestampSeconds: now(), body, secrets: [secret], version: '0.1.0' });
    assert.throws(() => new Webhook(newWebhookSecret()).verify(body, headers), WebhookVerificationError);
    assert.throws(() => new Webhook(secret).verify(body.replace('run_1', 'run_2'), headers), WebhookVerificationError);
    assert.throws(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'msg_4' }), WebhookVerificationError);
  });
});

describe('signatureHeader', () => {
  it('matches the signature standardwebhooks computes for the same message', () => {
    const secret = newWebhookSecret();
    const ts = 1_700_000_000;
    assert.equal(signatureHeader([secret], 'msg_5', ts, body), new Webhook(secret).sign('msg_5', new Date(ts * 1000), body));
  });

  it('refuses a malformed secret or none, without echoing the secret', () => {
    for (const bad of ['not-a-secret-value', 'whsec_', 'whsec_***notbase64***']) {
      assert.throws(() => signatureHeader([bad], 'msg_6', 1, body), { message: 'webhook secret is malformed: expected whsec_ followed by base64' });
    }
    assert.throws(() => signatureHeader([], 'msg_6', 1, body), /at least one secret/);
  });
});
