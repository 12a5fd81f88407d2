// The overview's charts over time (GET /stats/series): calls per hour by outcome, the answer rate and
// the time to answer (p50, p95), over the last 24 hours or 7 days, drawn with uPlot (served as-is
// from the uplot package, like Preact). Each chart says its figures in text too, beside the canvas.
import { html, useCallback, useEffect, useRef, useState } from './vendor-htm-preact.js';
import uPlot from './vendor-uplot.js';
import { api } from './api.js';
import { ErrorBox } from './ui.js';
/** @import { StatsSeries, StatsSeriesBucket } from './types.js' */

/** The windows offered, each read in hourly buckets (168 for a week: within the service's default limits). */
const WINDOWS = /** @type {const} */ ({
  '24h': { label: 'Last 24 hours', ms: 86_400_000 },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000 },
});
/** @typedef {keyof typeof WINDOWS} WindowName */

/**
 * The outcome lines: the ended states, and the runs not ended yet together. Colours follow the
 * state badges of console.css; the legend names each line in text.
 * @type {{ label: string, states: string[], stroke: string }[]}
 */
const OUTCOMES = [
  { label: 'completed', states: ['completed'], stroke: '#059669' },
  { label: 'busy', states: ['busy'], stroke: '#ea580c' },
  { label: 'no answer', states: ['no_answer'], stroke: '#d97706' },
  { label: 'rejected', states: ['rejected'], stroke: '#dc2626' },
  { label: 'failed', states: ['failed'], stroke: '#7f1d1d' },
  { label: 'canceled or expired', states: ['canceled', 'expired'], stroke: '#6b7280' },
  { label: 'not ended yet', states: ['queued', 'dialing', 'ringing', 'in_progress'], stroke: '#2563eb' },
];

const HEIGHT = 220;

/**
 * One uPlot chart over time, redrawn when its data changes and resized with its box.
 * @param {{ caption: string, testid: string, series: uPlot.Series[], data: uPlot.AlignedData, yAxis: uPlot.Axis, scale?: uPlot.Scale, summary: string }} props
 */
function TimeChart({ caption, testid, series, data, yAxis, scale, summary }) {
  const box = useRef(/** @type {HTMLDivElement | null} */ (null));
  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const width = () => Math.max(280, element.clientWidth);
    const chart = new uPlot(
      {
        width: width(),
        height: HEIGHT,
        series: [{ label: 'Time' }, ...series],
        axes: [{}, yAxis],
        scales: { x: { time: true }, ...(scale ? { y: scale } : {}) },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      element,
    );
    const observer = new ResizeObserver(() => chart.setSize({ width: width(), height: HEIGHT }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      chart.destroy();
    };
  }, [series, data, yAxis, scale]);
  return html`<figure class="time-chart" data-testid=${testid} data-points=${data[0].length}>
    <figcaption>${caption}</figcaption>
    <div class="time-chart-plot" ref=${box}></div>
    <p class="hint" data-testid=${`${testid}-summary`}>${summary}</p>
  </figure>`;
}

/** @param {number | null | undefined} ms */
const seconds = (ms) => (ms === null || ms === undefined ? null : ms / 1000);

/** @param {StatsSeriesBucket[]} buckets */
function summaries(buckets) {
  const total = buckets.reduce((sum, b) => sum + b.total, 0);
  const answered = buckets.reduce((sum, b) => sum + b.answered, 0);
  const p95s = buckets.map((b) => b.time_to_answer_ms.p95).filter((v) => v !== null);
  return {
    outcomes: `${total} ${total === 1 ? 'call' : 'calls'}: ${OUTCOMES.map((o) => `${o.label} ${buckets.reduce((sum, b) => sum + o.states.reduce((n, s) => n + (b.by_state[s] ?? 0), 0), 0)}`).join(', ')}.`,
    answers: `${answered} answered.`,
    times: p95s.length === 0 ? 'No call answered.' : `Slowest hourly p95: ${Math.max(...p95s) / 1000} s.`,
  };
}

const COUNT_AXIS = /** @type {uPlot.Axis} */ ({ label: 'Calls' });
const RATE_AXIS = /** @type {uPlot.Axis} */ ({ label: 'Answered', values: (_u, ticks) => ticks.map((t) => `${Math.round(t * 100)} %`) });
const RATE_SCALE = /** @type {uPlot.Scale} */ ({ range: [0, 1] });
const SECONDS_AXIS = /** @type {uPlot.Axis} */ ({ label: 'Seconds' });
const OUTCOME_SERIES = OUTCOMES.map((o) => /** @type {uPlot.Series} */ ({ label: o.label, stroke: o.stroke, width: 2 }));
// A rate or a time is null in an hour without an answer: the points stay drawn, so an hour between
// two such gaps still shows.
/** @param {string} colour */
const points = (colour) => /** @type {uPlot.Series.Points} */ ({ show: true, size: 7, fill: colour });
const RATE_SERIES = [/** @type {uPlot.Series} */ ({ label: 'answer rate', stroke: '#1d4ed8', width: 2, points: points('#1d4ed8'), value: (_u, v) => (v === null ? '—' : `${Math.round(v * 1000) / 10} %`) })];
const TIME_SERIES = [
  /** @type {uPlot.Series} */ ({ label: 'p50', stroke: '#0f766e', width: 2, points: points('#0f766e'), value: (_u, v) => (v === null ? '—' : `${v} s`) }),
  /** @type {uPlot.Series} */ ({ label: 'p95', stroke: '#b45309', width: 2, dash: [6, 4], points: points('#b45309'), value: (_u, v) => (v === null ? '—' : `${v} s`) }),
];

/**
 * What the three charts draw, made once per read, so the charts redraw when a read brings new
 * figures and not each time the page around them renders.
 * @param {StatsSeries} series
 */
function chartsOf(series) {
  const buckets = series.buckets;
  const x = buckets.map((b) => Date.parse(b.start) / 1000);
  const inOutcome = (/** @type {StatsSeriesBucket} */ b, /** @type {string[]} */ states) => states.reduce((n, s) => n + (b.by_state[s] ?? 0), 0);
  return {
    outcomes: /** @type {uPlot.AlignedData} */ ([x, ...OUTCOMES.map((o) => buckets.map((b) => inOutcome(b, o.states)))]),
    rate: /** @type {uPlot.AlignedData} */ ([x, buckets.map((b) => b.answer_rate)]),
    times: /** @type {uPlot.AlignedData} */ ([x, buckets.map((b) => seconds(b.time_to_answer_ms.p50)), buckets.map((b) => seconds(b.time_to_answer_ms.p95))]),
    said: summaries(buckets),
  };
}

/** @param {{ stream: { subscribe: (listener: () => void) => () => void } }} props */
export function OverviewCharts({ stream }) {
  const [windowName, setWindowName] = useState(/** @type {WindowName} */ ('24h'));
  const [charts, setCharts] = useState(/** @type {ReturnType<typeof chartsOf> | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      const since = new Date(Date.now() - WINDOWS[windowName].ms).toISOString();
      /** @type {StatsSeries} */
      const read = await api(`/stats/series?bucket=hour&since=${encodeURIComponent(since)}`);
      setCharts(chartsOf(read));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [windowName]);
  useEffect(() => {
    void load();
    // A bucket is an hour: a read a minute keeps the last one current; events ask sooner, at most
    // one read every few seconds (a campaign's burst of calls is one read).
    const timer = setInterval(load, 60_000);
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let pending;
    const stop = stream.subscribe(() => {
      if (pending === undefined)
        pending = setTimeout(() => {
          pending = undefined;
          void load();
        }, 3_000);
    });
    return () => {
      clearInterval(timer);
      clearTimeout(pending);
      stop();
    };
  }, [load, stream]);

  return html`<section class="overview-charts" aria-label="Calls over time">
    <div class="chart-controls">
      <h2>Over time</h2>
      <label>Window <select data-testid="chart-window" value=${windowName} onChange=${(/** @type {Event} */ e) => setWindowName(/** @type {WindowName} */ (/** @type {HTMLSelectElement} */ (e.target).value))}>
        ${Object.entries(WINDOWS).map(([name, w]) => html`<option value=${name}>${w.label}</option>`)}
      </select></label>
    </div>
    <${ErrorBox} error=${error} />
    ${charts
      ? html`<div class="time-charts">
          <${TimeChart} caption="Calls per hour by outcome" testid="chart-outcomes" series=${OUTCOME_SERIES} data=${charts.outcomes} yAxis=${COUNT_AXIS} summary=${charts.said.outcomes} />
          <${TimeChart} caption="Answer rate per hour" testid="chart-answer-rate" series=${RATE_SERIES} data=${charts.rate} yAxis=${RATE_AXIS} scale=${RATE_SCALE} summary=${charts.said.answers} />
          <${TimeChart} caption="Time to answer per hour (p50, p95)" testid="chart-time-to-answer" series=${TIME_SERIES} data=${charts.times} yAxis=${SECONDS_AXIS} summary=${charts.said.times} />
        </div>`
      : html`<p>Loading…</p>`}
  </section>`;
}
