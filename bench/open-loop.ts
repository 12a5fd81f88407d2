// The load generators of `npm run bench`. The open loop sends one request every 1/rate s, whatever
// the answers, as many independent clients would send them, for the latency figures. The closed
// loop keeps `concurrency` clients sending back to back, for the floor comparison's throughput.
//
// They run in a process of their own, with node:http and a keep-alive agent, because what they
// measure is milliseconds: in the bench's main thread (which holds the setup's stores) or through
// fetch (whose streams cost several times node:http's CPU per request), its own garbage collection
// and event-loop turns showed up as the server's latency: a bare floor route measured a p99 of
// 6–26 ms at a few hundred requests a second. And a closed loop through fetch in the bench's
// process was the floor's bottleneck, not the floor: on a machine of two cores it kept the
// floor's main thread about half busy while its own was nearly always busy.
//
// Each latency is counted from the moment the request was due, not from when it was written, so a
// generator that falls behind cannot hide a slow server (coordinated omission); how late the
// generator itself was to send is reported beside it, so a reader can tell the two apart.
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { fork } from 'node:child_process';

export interface OpenLoopJob {
  url: string;
  headers: Record<string, string>;
  body: string;
  rate: number;
  seconds: number;
}

export interface OpenLoopResult {
  rate_per_second: number;
  requests: number;
  errors: number;
  /** From the moment each request was due to its whole answer. */
  request_latency_ms: { p50: number; p99: number; max: number };
  /** How late the generator wrote requests after they were due (its own share of the latency). */
  send_lateness_ms: { p50: number; p99: number; max: number };
  /** Every request sent, its warm-up and errors included: what the server's CPU time in the round went to. */
  sent: number;
}

/** One run's figures and its raw samples, which pooledOpenLoops merges across rounds. */
export interface OpenLoopRun extends OpenLoopResult {
  samples: { latencies: number[]; lateness: number[] };
}

/** Several rounds' samples as one distribution, with each round's p99 beside it to show the spread. */
export function pooledOpenLoops(runs: OpenLoopRun[]): OpenLoopResult & { p99_per_round_ms: number[] } {
  const latencies = runs.flatMap((r) => r.samples.latencies);
  return {
    rate_per_second: runs[0]?.rate_per_second ?? 0,
    requests: latencies.length,
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    request_latency_ms: percentiles(latencies),
    send_lateness_ms: percentiles(runs.flatMap((r) => r.samples.lateness)),
    sent: runs.reduce((sum, r) => sum + r.sent, 0),
    p99_per_round_ms: runs.map((r) => r.request_latency_ms.p99),
  };
}

const round = (x: number) => Math.round(x * 100) / 100;

function percentiles(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number));
  return { p50: round(at(0.5)), p99: round(at(0.99)), max: round(at(1)) };
}

/** A closed-loop job: `concurrency` clients, each sending its next request when its last is answered. */
export interface ClosedLoopJob {
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  seconds: number;
}

/** A closed loop's answered requests' latencies (ms), its errors and how long it ran (s). */
export interface ClosedLoopRun {
  latencies: number[];
  errors: number;
  seconds: number;
}

type Job = ({ kind: 'open' } & OpenLoopJob) | ({ kind: 'closed' } & ClosedLoopJob);

/** Runs one job in a fresh generator process and resolves with what it sends back. */
function runInGenerator<R>(job: Job): Promise<R> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), [JSON.stringify(job)], { execArgv: ['--import', 'tsx'] });
    let result: R | undefined;
    child.once('message', (message: R) => (result = message));
    child.once('error', reject);
    child.once('exit', (code) => (result && code === 0 ? resolve(result) : reject(new Error(`${job.kind}-loop generator exited with code ${code}`))));
  });
}

/** Runs one open-loop job in a fresh process and resolves with its figures. */
export function runOpenLoop(job: OpenLoopJob): Promise<OpenLoopRun> {
  return runInGenerator({ kind: 'open', ...job });
}

/** Runs one closed-loop job in a fresh process and resolves with its samples. */
export function runClosedLoop(job: ClosedLoopJob): Promise<ClosedLoopRun> {
  return runInGenerator({ kind: 'closed', ...job });
}

/** A function sending the job's request once over a keep-alive agent, resolving with the status (0: no answer). */
function sender(job: { url: string; headers: Record<string, string>; body: string }, agent: Agent): () => Promise<number> {
  const target = new URL(job.url);
  const headers = { ...job.headers, 'content-length': String(Buffer.byteLength(job.body)) };
  return () =>
    new Promise<number>((resolve) => {
      const req = request({ host: target.hostname, port: target.port, path: target.pathname + target.search, method: 'POST', headers, agent }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
        res.once('error', () => resolve(0));
      });
      req.once('error', () => resolve(0));
      req.end(job.body);
    });
}

async function generateClosed(job: ClosedLoopJob): Promise<ClosedLoopRun> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.concurrency, maxFreeSockets: job.concurrency });
  const send = sender(job, agent);
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const endAt = started + job.seconds * 1000;
  const client = async () => {
    while (performance.now() < endAt) {
      const from = performance.now();
      if ((await send()) === 200) latencies.push(performance.now() - from);
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, client));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { latencies, errors, seconds };
}

async function generate(job: OpenLoopJob): Promise<OpenLoopRun> {
  // Enough idle sockets for the requests in flight at once; each is opened once and reused.
  const agent = new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 256 });
  const send = sender(job, agent);
  // Warm the sockets so connection set-up is not counted as latency.
  const warmUp = 16;
  await Promise.all(Array.from({ length: warmUp }, send));

  const total = Math.max(1, Math.round(job.rate * job.seconds));
  const latencies: number[] = [];
  const lateness: number[] = [];
  let errors = 0;
  const inFlight: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / job.rate;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((resolve) => setTimeout(resolve, Math.floor(wait)));
    // Up to a millisecond early (timers have that resolution): send now rather than late, and
    // count from the later of the two moments.
    const sentAt = performance.now();
    lateness.push(Math.max(0, sentAt - due));
    const from = Math.max(due, sentAt);
    inFlight.push(
      send().then((status) => {
        if (status === 200) latencies.push(performance.now() - from);
        else errors++;
      }),
    );
  }
  await Promise.all(inFlight);
  agent.destroy();
  return {
    rate_per_second: round(job.rate),
    requests: latencies.length,
    errors,
    request_latency_ms: percentiles(latencies),
    send_lateness_ms: percentiles(lateness),
    sent: warmUp + total,
    samples: { latencies, lateness },
  };
}

// Run as the generator process (forked by runInGenerator): the job comes as the argument, the figures go back by IPC.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const job = JSON.parse(process.argv[2] ?? '{}') as Job;
  const result = job.kind === 'closed' ? await generateClosed(job) : await generate(job);
  process.send(result, () => process.disconnect());
}
