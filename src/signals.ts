// In-process signals between the parts of one node: "there is work to dispatch" (so an idle
// dispatcher wakes at once instead of waiting for its next poll) and provider events on their way
// to the lifecycle code, cancel requests for calls this node holds, webhook deliveries written,
// delivery attempts and campaign changes journalled (for the event stream). Other nodes learn of work and cancel
// requests by polling the store.
import type { LiveCall, MachineVerdict, ProviderEvent, TransferOutcome } from './telephony/provider.js';

/** An event some other part of the node already applied: whether it moved the run. */
export interface AppliedElsewhere {
  moved: boolean;
}

export class Signals {
  private readonly workListeners = new Set<() => void>();
  private readonly outboxListeners = new Set<() => void>();
  private readonly journalListeners = new Set<() => void>();
  private readonly eventListeners = new Set<(event: ProviderEvent, appliedElsewhere: AppliedElsewhere | undefined) => void>();
  private readonly cancelListeners = new Set<(runId: number) => Promise<void>>();
  private readonly verdictListeners = new Set<(verdict: MachineVerdict) => void>();
  private readonly transferListeners = new Set<(outcome: TransferOutcome) => void>();
  private readonly heldCallLookups = new Set<(runId: number) => LiveCall | undefined>();
  private readonly hangUpListeners = new Set<(runId: number) => Promise<void>>();
  private readonly campaignListeners = new Set<() => void>();

  onCampaigns(listener: () => void): () => void {
    this.campaignListeners.add(listener);
    return () => this.campaignListeners.delete(listener);
  }

  /** A campaign was started, resumed or given contacts on this node: its scheduler looks at once. */
  campaigns(): void {
    for (const listener of this.campaignListeners) listener();
  }

  onWork(listener: () => void): () => void {
    this.workListeners.add(listener);
    return () => this.workListeners.delete(listener);
  }

  work(): void {
    for (const listener of this.workListeners) listener();
  }

  onOutbox(listener: () => void): () => void {
    this.outboxListeners.add(listener);
    return () => this.outboxListeners.delete(listener);
  }

  /** Webhook deliveries were written on this node: its delivery worker looks at once. */
  outbox(): void {
    for (const listener of this.outboxListeners) listener();
  }

  onJournal(listener: () => void): () => void {
    this.journalListeners.add(listener);
    return () => this.journalListeners.delete(listener);
  }

  /** A webhook delivery attempt or a campaign's change was journalled on this node: its open event streams read at once. */
  journal(): void {
    for (const listener of this.journalListeners) listener();
  }

  onProviderEvent(listener: (event: ProviderEvent, appliedElsewhere: AppliedElsewhere | undefined) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  /**
   * A provider event for the node holding the call. With `appliedElsewhere`, the event was already
   * applied through the store (a callback, or reconciliation): the holder only brings its timers in
   * step. Without it (an in-process provider's event) the holder applies it, once.
   */
  providerEvent(event: ProviderEvent, appliedElsewhere?: AppliedElsewhere): void {
    for (const listener of this.eventListeners) listener(event, appliedElsewhere);
  }

  onMachineVerdict(listener: (verdict: MachineVerdict) => void): () => void {
    this.verdictListeners.add(listener);
    return () => this.verdictListeners.delete(listener);
  }

  /** Who answered a call this node holds in-process (the simulator's verdicts): its dispatcher acts on it. */
  machineVerdict(verdict: MachineVerdict): void {
    for (const listener of this.verdictListeners) listener(verdict);
  }

  onTransferOutcome(listener: (outcome: TransferOutcome) => void): () => void {
    this.transferListeners.add(listener);
    return () => this.transferListeners.delete(listener);
  }

  /** How a transfer this node's provider carried out ended (SIP's NOTIFY, the simulator): the run's writer applies it. */
  transferOutcome(outcome: TransferOutcome): void {
    for (const listener of this.transferListeners) listener(outcome);
  }

  /** Where this node's held calls can be found (the dispatcher's live calls). */
  onHeldCall(lookup: (runId: number) => LiveCall | undefined): () => void {
    this.heldCallLookups.add(lookup);
    return () => this.heldCallLookups.delete(lookup);
  }

  /** The call this node holds for a run (the agent runtime's transfer and digits on an in-process call); undefined when another node holds it. */
  heldCall(runId: number): LiveCall | undefined {
    for (const lookup of this.heldCallLookups) {
      const call = lookup(runId);
      if (call) return call;
    }
    return undefined;
  }

  onCancel(listener: (runId: number) => Promise<void>): () => void {
    this.cancelListeners.add(listener);
    return () => this.cancelListeners.delete(listener);
  }

  onHangUp(listener: (runId: number) => Promise<void>): () => void {
    this.hangUpListeners.add(listener);
    return () => this.hangUpListeners.delete(listener);
  }

  /**
   * A run whose call this node may hold has ended (its agent hung up): the holder puts the line
   * down; resolves when it has. A call held by another node is put down on that node's next tick.
   */
  async hangUp(runId: number): Promise<void> {
    await Promise.all([...this.hangUpListeners].map((listener) => listener(runId)));
  }

  /** Asks this node's dispatcher to cancel a live call it holds; resolves when it has acted. */
  async cancel(runId: number): Promise<void> {
    await Promise.all([...this.cancelListeners].map((listener) => listener(runId)));
  }
}
