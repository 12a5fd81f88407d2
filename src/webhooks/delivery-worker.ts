// Sends the outbox: claims due deliveries (store/statements/webhook-statements.ts decides which: due, in
// per-run order, within each endpoint's concurrency, none held by another node), signs and sends
// each, and records the attempt with what follows from it (attempt-outcome.ts). Every node that
// runs the dispatcher runs one. A node that dies mid-send lets its claims lapse and another node
// sends them again: delivery is at least once, and receivers drop duplicates by `webhook-id`.
import type { Logger } from 'pino';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.js';
import { webhooksMayUsePrivateNetworks } from '../config.js';
import type { Metrics } from '../metrics.js';
import { claimDueDeliveries, recordAttempt, WEBHOOK_CHANNEL, type ClaimedDelivery } from '../store/statements/webhook-statements.js';
import type { Store } from '../store/engine/store.js';
import type { CredentialsCipher } from '../shared/credentials-cipher.js';
import { attemptOutcome } from './attempt-outcome.js';
import { messageBody } from './message.js';
import { delayWithJitter, parseRetrySchedule } from './retry-schedule.js';
import { sendWebhook } from './send.js';
import { webhookHeaders } from './signature.js';

/**
 * A claim lasts the attempt's timeout and this margin to record it, generous because a claim that
 * lapses while its node is merely slow (a busy store, a starved event loop) is sent twice. A node
 * that dies mid-send holds its deliveries that long; then another node sends them again.
 */
const CLAIM_MARGIN_MS = 30_000;

export interface DeliveryWorkerDeps {
  store: Store;
  clock: { now(): number };
  logger: Logger;
  cipher: CredentialsCipher;
  metrics: Pick<Metrics, 'webhookAttempts' | 'webhookDeliveries' | 'webhookAttemptDuration'>;
  config: Pick<
    Config,
    | 'WEBHOOK_RETRY_SCHEDULE'
    | 'WEBHOOK_TIMEOUT_MS'
    | 'WEBHOOK_ENDPOINT_CONCURRENCY'
    | 'WEBHOOK_DISABLE_AFTER_MS'
    | 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'
    | 'WEBHOOK_POLL_INTERVAL_MS'
    | 'WEBHOOK_BATCH_SIZE'
  >;
  nodeId: string;
  version: string;
  /** Called after an attempt is recorded (and journalled for the event stream). */
  onRecorded?: () => void;
}

export class DeliveryWorker {
  private readonly schedule: readonly number[];
  private readonly allowPrivate: boolean;
  /** Decrypted secrets by their envelope: decrypting on every attempt would cost more than sending. */
  private readonly secrets = new LRUCache<string, string>({ max: 1_000 });
  private running = false;
  private loop: Promise<void> | undefined;
  private inFlight = new Set<Promise<void>>();
  private wakeUp: (() => void) | undefined;
  private listening: Promise<(() => Promise<void>) | undefined> | undefined;
  private woken = false;

  constructor(private readonly deps: DeliveryWorkerDeps) {
    this.schedule = parseRetrySchedule(deps.config.WEBHOOK_RETRY_SCHEDULE);
    this.allowPrivate = webhooksMayUsePrivateNetworks(deps.config);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // Deliveries written on any node (announced once committed: deps.ts): look at once. The poll
    // stays as the safety net for a lost notification or connection.
    this.listening = this.deps.store
      .listen(WEBHOOK_CHANNEL, () => this.wake(), (error) => this.deps.logger.warn({ err: error }, 'webhook notifications lost; polling continues'))
      .catch((error: unknown) => {
        this.deps.logger.warn({ err: error }, 'cannot listen for webhook notifications; polling only');
        return undefined;
      });
    this.loop = this.run();
  }

  /** Something became due on this node (an event was written, a retry requested): look now. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * Stops claiming and waits for the attempts in flight, at most `waitMs`: one still unanswered then
   * is sent again by a node once its claim lapses (at least once).
   */
  async stop(waitMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.running = false;
    this.wake();
    await this.loop;
    const unlisten = await this.listening;
    this.listening = undefined;
    await unlisten?.();
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      if (Number.isFinite(waitMs)) timer = setTimeout(resolve, waitMs);
    });
    await Promise.race([Promise.all(this.inFlight), gaveUp]);
    clearTimeout(timer);
  }

  /**
   * Claims what is due now and sends it, resolving when those attempts are recorded; the number
   * claimed. For tests, which drive it with a fake clock; the loop does not wait for the sends.
   */
  async deliverDue(): Promise<number> {
    const sends = await this.claimAndSend();
    await Promise.all(sends);
    return sends.length;
  }

  /** Claims what is due and starts sending it; resolves once claimed, with the sends under way. */
  private async claimAndSend(): Promise<Promise<void>[]> {
    const room = this.deps.config.WEBHOOK_BATCH_SIZE - this.inFlight.size;
    if (room <= 0) return [];
    const now = this.deps.clock.now();
    const claimed = await claimDueDeliveries(this.deps.store, {
      now,
      nodeId: this.deps.nodeId,
      lockUntil: now + this.deps.config.WEBHOOK_TIMEOUT_MS + CLAIM_MARGIN_MS,
      limit: room,
      perEndpoint: this.deps.config.WEBHOOK_ENDPOINT_CONCURRENCY,
    });
    // A message reports a write; it leaves only once that write is on the disk (SQLite may show a
    // durable commit a moment before its flush ends: store/engine/wal-sync.ts). At once when covered.
    if (claimed.length > 0) await this.deps.store.durable();
    return claimed.map((delivery) => {
      const send = this.attempt(delivery).finally(() => {
        this.inFlight.delete(send);
        // Its successor in the same run, or a delivery waiting for room, may now go.
        this.wake();
      });
      this.inFlight.add(send);
      return send;
    });
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.woken = false;
      try {
        await this.claimAndSend();
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'webhook delivery: claiming failed; retrying on the next poll');
      }
      await this.sleep(this.deps.config.WEBHOOK_POLL_INTERVAL_MS);
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || !this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }

  private secret(orgId: number, envelope: string): string {
    let secret = this.secrets.get(envelope);
    if (secret === undefined) {
      const decrypted = this.deps.cipher.decrypt(orgId, envelope).secret;
      if (typeof decrypted !== 'string') throw new Error('webhook secret envelope holds no secret');
      secret = decrypted;
      this.secrets.set(envelope, secret);
    }
    return secret;
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    const { config, clock, logger, metrics } = this.deps;
    const startedAt = clock.now();
    let result: { httpStatus: number | null; error: string | null; durationMs: number; responseBody: string | null };
    try {
      const body = messageBody(d);
      const secrets = [this.secret(d.org_id, d.secret_encrypted)];
      if (d.previous_secret_encrypted !== null && d.previous_secret_expires_at !== null && d.previous_secret_expires_at > startedAt) {
        secrets.push(this.secret(d.org_id, d.previous_secret_encrypted));
      }
      const headers = webhookHeaders({ msgId: d.message_id, timestampSeconds: Math.floor(startedAt / 1000), body, secrets, version: this.deps.version });
      result = await sendWebhook({ url: d.url, headers, body, timeoutMs: config.WEBHOOK_TIMEOUT_MS, allowPrivateNetworks: this.allowPrivate });
    } catch (error) {
      // A message that cannot even be built or signed is a bug or a lost key: recorded, retried.
      logger.error({ err: error, delivery_id: d.id }, 'webhook delivery: could not prepare the message');
      result = { httpStatus: null, error: 'internal error preparing the message', durationMs: 0, responseBody: null };
    }
    const now = clock.now();
    const outcome = attemptOutcome({
      result,
      attemptsBefore: d.attempt_count,
      schedule: this.schedule,
      now,
      failingSince: d.failing_since,
      disableAfterMs: config.WEBHOOK_DISABLE_AFTER_MS,
      jitter: (ms) => delayWithJitter(ms),
    });
    metrics.webhookAttempts.inc({ result: result.httpStatus === null ? 'error' : `${Math.floor(result.httpStatus / 100)}xx` });
    metrics.webhookAttemptDuration.observe(result.durationMs / 1000);
    try {
      const recorded = await recordAttempt(this.deps.store, {
        deliveryId: d.id,
        endpointId: d.endpoint_id,
        nodeId: this.deps.nodeId,
        at: startedAt,
        httpStatus: result.httpStatus,
        error: result.error,
        durationMs: Math.round(result.durationMs),
        responseBody: result.responseBody,
        status: outcome.status,
        nextAttemptAt: outcome.nextAttemptAt,
        // The endpoint's row is written only when this changes it (most attempts do not).
        endpoint: outcome.disabled || outcome.endpoint.failing_since !== d.failing_since ? outcome.endpoint : undefined,
        endpointDisabled: outcome.disabled ?? null,
        orgId: d.org_id,
        messageId: d.message_id,
        eventType: d.event_type,
        runId: d.run_id,
        recordedAt: now,
      });
      // This node's open streams read it at once rather than at their next poll.
      if (recorded) this.deps.onRecorded?.();
      if (recorded && outcome.status !== 'pending') metrics.webhookDeliveries.inc({ outcome: outcome.status });
      if (recorded && outcome.disabled) {
        logger.warn({ endpoint_id: d.endpoint_id, reason: outcome.disabled }, 'webhook endpoint disabled');
      }
    } catch (error) {
      // Not recorded: the claim lapses and the delivery is sent again (at least once).
      logger.warn({ err: error, delivery_id: d.id }, 'webhook delivery: recording the attempt failed; it will be sent again');
    }
  }
}
