// Overview: the last hour's calls by state (every state the service has, from GET /run-states) and
// by outcome, and the queue depth and live calls of each route; read every few seconds and soon
// after events. Below, the charts over time (charts.js).
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { OverviewCharts } from './charts.js';
import { useRunStates } from './run-states.js';
import { ErrorBox, formatTime, StateBadge } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { Stats } from './types.js' */

/**
 * A horizontal bar chart of counts, each bar labelled with its name and number (text, not only colour).
 * @param {{ label: string, rows: { state: string, count: number }[] }} props
 */
function BarChart({ label, rows }) {
  const max = Math.max(1, ...rows.map((r) => r.count));
  return html`<figure class="chart">
    <figcaption>${label}</figcaption>
    <ul>
      ${rows.map(
        (r) => html`<li>
          <span class="bar-label"><${StateBadge} state=${r.state} /></span>
          <span class="bar-track"><span class=${`bar state-${r.state}`} style=${{ width: `${(100 * r.count) / max}%` }}></span></span>
          <span class="bar-count">${r.count}</span>
        </li>`,
      )}
    </ul>
  </figure>`;
}

/** @param {PageProps} props */
export function OverviewPage({ stream }) {
  const states = useRunStates();
  const [stats, setStats] = useState(/** @type {Stats | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      /** @type {Stats} */
      const read = await api('/stats');
      setStats(read);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, []);
  useEffect(() => {
    void load();
    // Queue depth and live calls change without events of this organization's own (other
    // organizations share no route, but a poll keeps the numbers honest); events refresh sooner.
    const timer = setInterval(load, 5_000);
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let pending;
    const stop = stream.subscribe(() => {
      clearTimeout(pending);
      pending = setTimeout(load, 300);
    });
    return () => {
      clearInterval(timer);
      clearTimeout(pending);
      stop();
    };
  }, [load, stream]);
  return html`<section>
    <h1>Overview</h1>
    <${ErrorBox} error=${error} />
    ${stats
      ? html`<p>${stats.total} ${stats.total === 1 ? 'call' : 'calls'} since ${formatTime(stats.since)}.</p>
        <${BarChart} label="Calls in the last hour by state" rows=${states.all.map((state) => ({ state, count: stats.by_state[state] ?? 0 }))} />
        <h2>Routes</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Route</th><th scope="col">Provider</th><th scope="col">Queued</th><th scope="col">Live</th></tr></thead>
          <tbody>${stats.routes.map((r) => html`<tr key=${r.telephony_configuration_id}><td>${r.name}</td><td>${r.provider}</td><td data-testid="route-queued">${r.queued}</td><td data-testid="route-live">${r.live}</td></tr>`)}</tbody>
        </table></div>
        <h2>Outcomes</h2>
        <ul class="outcomes">${stats.by_outcome.map((o) => html`<li><${StateBadge} state=${o.state} /> ${o.outcome_reason ?? '—'}: ${o.count}</li>`)}</ul>`
      : html`<p>Loading…</p>`}
    <${OverviewCharts} stream=${stream} />
  </section>`;
}

