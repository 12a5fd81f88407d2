// The run states as the service serves them (GET /run-states, from its one list in runs/states.ts):
// read once when the console opens signed in, then given to every page through RunStatesContext.
// The console copies no state: a state added to the service shows in the filters, the overview and
// the badges without a change here.
import { api } from './api.js';
import { createContext, useContext } from './vendor-htm-preact.js';
/** @import { RunStateInfo, RunStateList } from './types.js' */

/**
 * @typedef {object} RunStates
 * @property {string[]} all every state, in lifecycle order
 * @property {(state: string) => boolean} isKnown
 * @property {(state: string) => boolean} isTerminal the run has ended: nothing follows
 */

/** @param {RunStateInfo[]} list */
export function runStatesOf(list) {
  const all = list.map((s) => s.state);
  const terminal = new Set(list.filter((s) => s.terminal).map((s) => s.state));
  /** @type {RunStates} */
  const states = { all, isKnown: (state) => all.includes(state), isTerminal: (state) => terminal.has(state) };
  return states;
}

/** @returns {Promise<RunStates>} */
export async function loadRunStates() {
  /** @type {RunStateList} */
  const answer = await api('/run-states');
  return runStatesOf(answer.data);
}

/** The states every page reads; the shell provides them once they are loaded (none before). */
export const RunStatesContext = createContext(runStatesOf([]));

export const useRunStates = () => useContext(RunStatesContext);
