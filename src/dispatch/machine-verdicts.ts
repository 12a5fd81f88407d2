// Who answered, and what Dialtone does about it (answering-machine detection). A provider that
// detects machines reports a verdict (the simulator in-process, Twilio by a signed callback on any
// node, reconciliation by asking); it is recorded once (runs/answered-by.ts), and the first time
// only, the run's settings decide the action:
//   - a person, or `unknown`: nothing; the agent has the call;
//   - a machine with `hangup`, or a fax (it can hear no message): the run ends `completed`
//     (`machine_hangup`) and the line is put down;
//   - a machine with `leave_message`: the rendered message is spoken (the provider's
//     `leaveMessage`, after the greeting's end) and the call ends `voicemail_left`;
//   - a machine with `connect_agent`: the agent keeps the call; the verdict is recorded.
import type { Deps } from '../deps.js';
import type { AnsweredBy } from '../store/schema/schema.js';
import { decodeJson } from '../store/engine/store.js';
import { selectDefinitionGraph, selectRunAnsweringMachine } from '../store/statements/run-reads.js';
import type { LiveCall, MachineDetectionRequest, MachineVerdict } from '../telephony/provider.js';
import { machineDetectionOf, type AnsweringMachine, type MachineAction, type MachineDetectionSettings } from '../workflows/answering-machine.js';
import { templateContext, type DefinitionGraph } from '../workflows/definition.js';
import { renderTemplate, type TemplateContext } from '../workflows/templates.js';

interface RunMachineSettings {
  settings: MachineDetectionSettings | undefined;
  context: TemplateContext;
}

/** A run's settings: its campaign's own when it has some, else its pinned agent's. */
export async function machineSettingsOf(deps: Pick<Deps, 'store'>, runId: number): Promise<RunMachineSettings | undefined> {
  const row = await selectRunAnsweringMachine(deps.store, runId);
  if (!row) return undefined;
  const graph = decodeJson<DefinitionGraph>(row.graph);
  const campaign = row.campaignAnsweringMachine === null ? null : (JSON.parse(row.campaignAnsweringMachine) as AnsweringMachine);
  const initialContext = row.initialContext === null ? null : (JSON.parse(row.initialContext) as TemplateContext);
  return { settings: machineDetectionOf(graph.answering_machine, campaign), context: templateContext(graph, initialContext) };
}

/** What a dial asks of its provider; undefined when the run's settings ask for no detection. */
export async function machineDetectionForDial(deps: Pick<Deps, 'store'>, runId: number): Promise<MachineDetectionRequest | undefined> {
  const settings = (await machineSettingsOf(deps, runId))?.settings;
  return settings && { detect: settings.detect, timeoutMs: settings.timeoutMs };
}

/**
 * What each dial asks of detection, without a query per dial: a definition never changes once
 * written (saving a draft writes a new row), so what it asks is read once per node and kept by
 * definition id (at most `maxDefinitions`, then forgotten all at once). A campaign's run is read per
 * dial, since its campaign's own settings replace its agent's.
 */
export class DialDetections {
  /**
   * The read itself is kept, not only its answer: a batch dials its runs at once, and every dial
   * of a definition not yet known would otherwise read it before the first read answers (a batch
   * of 1,000 runs of one agent read its graph 1,000 times).
   */
  private readonly byDefinition = new Map<number, Promise<AnsweringMachine | null>>();

  constructor(
    private readonly deps: Pick<Deps, 'store'>,
    private readonly maxDefinitions = 1_000,
    private readonly readGraph: (definitionId: number) => Promise<unknown> = (definitionId) => selectDefinitionGraph(deps.store, definitionId),
  ) {}

  async forDial(run: { id: number; definition_id: number; campaign_id: number | null }): Promise<MachineDetectionRequest | undefined> {
    if (run.campaign_id !== null) return machineDetectionForDial(this.deps, run.id);
    let reading = this.byDefinition.get(run.definition_id);
    if (reading === undefined) {
      const read = this.askedOf(run.definition_id);
      // A failed read is not kept: the next dial of this definition reads it again.
      read.catch(() => {
        if (this.byDefinition.get(run.definition_id) === read) this.byDefinition.delete(run.definition_id);
      });
      if (this.byDefinition.size >= this.maxDefinitions) this.byDefinition.clear();
      this.byDefinition.set(run.definition_id, read);
      reading = read;
    }
    const asked = await reading;
    const settings = machineDetectionOf(asked ?? undefined);
    return settings && { detect: settings.detect, timeoutMs: settings.timeoutMs };
  }

  private async askedOf(definitionId: number): Promise<AnsweringMachine | null> {
    const graph = await this.readGraph(definitionId);
    return graph === undefined ? null : (decodeJson<DefinitionGraph>(graph).answering_machine ?? null);
  }
}

/** The action a verdict calls for under these settings (undefined: none, the agent keeps the call). */
export function machineActionOf(answeredBy: AnsweredBy, settings: MachineDetectionSettings | undefined): MachineAction | undefined {
  if (answeredBy === 'fax') return settings?.onMachine === 'connect_agent' ? 'connect_agent' : 'hangup';
  if (answeredBy !== 'machine') return undefined;
  return settings?.onMachine ?? 'connect_agent';
}

export interface VerdictHandling {
  /** Ends the run `completed` with `reason` and puts the line down (the holder's own bookkeeping included). */
  hangUp(reason: string): Promise<void>;
  /** Speaks the message on the call, which then ends by itself. */
  leaveMessage(text: string): Promise<void>;
}

/**
 * Records a verdict and acts on it, once: a duplicate or later verdict changes nothing. With
 * `act: false` (a verdict learned from a call that already ended) it is only recorded.
 */
export async function applyMachineVerdict(deps: Deps, verdict: MachineVerdict, handling: VerdictHandling | undefined): Promise<void> {
  const run = await machineSettingsOf(deps, verdict.runId);
  if (!run) return;
  const action = handling ? machineActionOf(verdict.answeredBy, run.settings) : undefined;
  const message = action === 'leave_message' ? renderTemplate(run.settings?.message ?? '', run.context).trim() : undefined;
  const recorded = await deps.lifecycle.recordAnsweredBy(verdict.runId, {
    at: verdict.at,
    answeredBy: verdict.answeredBy,
    raw: verdict.raw,
    ...(action === 'leave_message' ? { outcomeReason: 'voicemail_left' } : {}),
    data: { ...(action ? { action } : {}), ...(message !== undefined ? { message } : {}) },
  });
  if (!recorded || !handling) return;
  if (action === 'hangup') await handling.hangUp('machine_hangup');
  else if (action === 'leave_message' && message !== undefined) await handling.leaveMessage(message);
}

/**
 * The handling of a verdict learned outside the node holding the call (a callback): the run first,
 * then the line, through the provider's REST API. The holder's timers follow the provider's
 * `completed` that comes after.
 */
export function remoteHandling(deps: Deps, call: LiveCall): VerdictHandling {
  const provider = deps.providers[call.route.provider];
  return {
    hangUp: async (reason) => {
      const applied = await deps.lifecycle.transition(call.runId, 'completed', { at: deps.clock.now(), reason, onlyFrom: 'in_progress' });
      if (applied) await provider.hangUp(call);
    },
    leaveMessage: async (text) => {
      if (provider.leaveMessage) await provider.leaveMessage(call, text);
    },
  };
}
