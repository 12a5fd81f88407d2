// Pacing of reads that events ask for: a burst of events becomes one read (debounced) or at most
// one read a period (throttled).
import { useCallback, useEffect, useRef } from './vendor-htm-preact.js';

/**
 * Runs `work` once after `ms` of quiet, however often it is asked (bursts of events → one read).
 * @param {() => unknown} work
 * @param {number} ms
 * @returns {() => void}
 */
export function useDebounced(work, ms) {
  /** @type {import('./vendor-htm-preact.js').MutableRef<ReturnType<typeof setTimeout> | undefined>} */
  const timer = useRef(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => work(), ms);
  }, [work, ms]);
}

/**
 * `work` at most once per `ms`: at once after a quiet spell, else once at the end of the wait for every call during it.
 * @param {() => unknown} work
 * @param {number} ms
 * @returns {() => void}
 */
export function useThrottled(work, ms) {
  const latest = useRef(work);
  latest.current = work;
  /** @type {import('./vendor-htm-preact.js').MutableRef<{ last: number, timer: ReturnType<typeof setTimeout> | undefined }>} */
  const state = useRef({ last: 0, timer: undefined });
  useEffect(() => () => clearTimeout(state.current.timer), []);
  return useCallback(() => {
    const s = state.current;
    if (s.timer !== undefined) return;
    const run = () => {
      s.timer = undefined;
      s.last = Date.now();
      void latest.current();
    };
    const wait = s.last + ms - Date.now();
    if (wait <= 0) run();
    else s.timer = setTimeout(run, wait);
  }, [ms]);
}
