// An agent's answering-machine settings (the definition's top-level `answering_machine`, which a
// campaign may replace with its own): whether to ask the provider who answered, and what to do
// when a machine did. Validated like the rest of a definition, every problem with a JSON Pointer.
// Absent, or `detect: "off"`, nothing is asked: the call behaves as it always did.
import type { FieldError } from '../errors.js';
import { templateProblems } from './templates.js';

export const DETECT_MODES = ['off', 'on', 'message_end'] as const;
export type DetectMode = (typeof DETECT_MODES)[number];
export const MACHINE_ACTIONS = ['hangup', 'leave_message', 'connect_agent'] as const;
export type MachineAction = (typeof MACHINE_ACTIONS)[number];

/** Bounds of detection_timeout_ms: Twilio's MachineDetectionTimeout takes 3 to 59 seconds. */
export const DETECTION_TIMEOUT_MS = { min: 3_000, max: 59_000 } as const;

export interface AnsweringMachine {
  detect: DetectMode;
  on_machine?: MachineAction;
  /** A template rendered with the run's context, as the greeting is. */
  message?: string;
  detection_timeout_ms?: number;
}

/** Settings that ask for detection: what the providers are given. */
export interface MachineDetectionSettings {
  /** `message_end`: the verdict waits for the end of a machine's greeting (its beep), so a message can follow. */
  detect: Exclude<DetectMode, 'off'>;
  onMachine: MachineAction;
  message: string | undefined;
  timeoutMs: number | undefined;
}

const FIELDS = ['detect', 'on_machine', 'message', 'detection_timeout_ms'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The problems of an `answering_machine` object, each pointed under `at` (`/answering_machine`). */
export function answeringMachineProblems(input: unknown, at: string): FieldError[] {
  const problems: FieldError[] = [];
  const add = (pointer: string, detail: string) => problems.push({ pointer, detail });
  if (!isObject(input)) {
    add(at, 'Must be an object ({ "detect", "on_machine"?, "message"?, "detection_timeout_ms"? }).');
    return problems;
  }
  for (const key of Object.keys(input)) if (!FIELDS.includes(key)) add(`${at}/${key}`, `Unknown field "${key}".`);
  const { detect, on_machine: onMachine, message, detection_timeout_ms: timeout } = input;
  if (detect === undefined) add(`${at}/detect`, `Required: one of ${DETECT_MODES.join(', ')}.`);
  else if (!(DETECT_MODES as readonly unknown[]).includes(detect)) add(`${at}/detect`, `Must be one of ${DETECT_MODES.join(', ')}.`);
  if (onMachine === undefined) {
    if (detect === 'on' || detect === 'message_end') add(`${at}/on_machine`, `Required when detecting: one of ${MACHINE_ACTIONS.join(', ')}.`);
  } else if (!(MACHINE_ACTIONS as readonly unknown[]).includes(onMachine)) add(`${at}/on_machine`, `Must be one of ${MACHINE_ACTIONS.join(', ')}.`);
  if (message !== undefined) {
    if (typeof message !== 'string') add(`${at}/message`, 'Must be a string (a template).');
    else for (const problem of templateProblems(message)) add(`${at}/message`, problem);
  }
  if (onMachine === 'leave_message') {
    if (message === undefined) add(`${at}/message`, 'Required to leave a message.');
    // A message spoken over the greeting is lost: it must wait for the beep.
    if (detect === 'on') add(`${at}/detect`, 'Leaving a message needs "message_end", which waits for the end of the greeting.');
  }
  if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < DETECTION_TIMEOUT_MS.min || timeout > DETECTION_TIMEOUT_MS.max)) {
    add(`${at}/detection_timeout_ms`, `Must be a whole number of milliseconds from ${DETECTION_TIMEOUT_MS.min} to ${DETECTION_TIMEOUT_MS.max}.`);
  }
  return problems;
}

/**
 * What a run asks of its provider: its campaign's settings when the campaign has its own, else its
 * agent's; undefined when neither asks for detection.
 */
export function machineDetectionOf(agent: AnsweringMachine | undefined, campaign?: AnsweringMachine | null): MachineDetectionSettings | undefined {
  const settings = campaign ?? agent;
  if (!settings || settings.detect === 'off') return undefined;
  return { detect: settings.detect, onMachine: settings.on_machine ?? 'connect_agent', message: settings.message, timeoutMs: settings.detection_timeout_ms };
}
