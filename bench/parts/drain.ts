// The `drain` part (`dispatcher`): a dispatcher node's idle memory on a database with nothing to
// dial, then a backlog of queued runs inserted directly (the API is measured by other parts) and
// drained by one dispatcher node: dials per second, pacing re-slots, runs dialed against distinct
// provider calls, and the node's memory.
import type { StoreKind } from '../../test/helpers/stores.js';
import { BACKLOG, INSTANT_SIMULATOR } from '../knobs.js';
import { round } from '../load.js';
import { cpuTimeOf, idleMemory, memoryOf } from '../machine.js';
import { setUp, startBenchService, waitUntilDialed, type Setup } from '../services.js';

/** A dispatcher node's idle memory, on a database with nothing to dial. */
async function idleDispatcher(kind: StoreKind) {
  const setup = await setUp(kind);
  try {
    const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'dispatcher' });
    try {
      return await idleMemory(service.child.pid);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  } finally {
    await setup.drop();
  }
}

async function dispatcherThroughput(kind: StoreKind, setup: Setup) {
  // Insert the backlog directly (the API is measured separately), then time a dispatcher draining it.
  const now = Date.now();
  const definition = await setup.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
  for (let offset = 0; offset < BACKLOG; offset += 500) {
    const rows = Array.from({ length: Math.min(500, BACKLOG - offset) }, () => ({
      org_id: setup.fixture.orgId,
      workflow_id: definition.workflow_id,
      definition_id: definition.id,
      mode: 'published' as const,
      phone_number: '+12025550123',
      telephony_configuration_id: setup.routeId,
      state: 'queued' as const,
      created_at: now,
      updated_at: now,
    }));
    await setup.store.db.insertInto('workflow_runs').values(rows).execute();
  }
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'dispatcher', DISPATCH_BATCH_SIZE: '1000' });
  // Read as it starts, with the backlog already there: its idle memory is read by idleDispatcher.
  const atStart = memoryOf(service.child.pid);
  // CPU time as well as wall time: on a shared machine the dials per second move with whatever
  // else runs, while the CPU a dial costs the node (and the database) moves much less.
  const cpuBefore = cpuTimeOf(service.child.pid, kind);
  const started = Date.now();
  let memory;
  let cpuAfter;
  let reslots = 'unknown';
  try {
    await waitUntilDialed(setup.store, 600_000);
    cpuAfter = cpuTimeOf(service.child.pid, kind);
    memory = memoryOf(service.child.pid);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    reslots = /^dialtone_pacing_reslots_total (\d+)/m.exec(metrics)?.[1] ?? 'not reported';
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
  }
  const seconds = (Date.now() - started) / 1000;
  const dialed = await setup.store.db
    .selectFrom('workflow_runs')
    .select((eb) => [eb.fn.countAll<number>().as('runs'), eb.fn.count<number>('provider_call_id').distinct().as('calls')])
    .where('dial_sent_at', 'is not', null)
    .executeTakeFirstOrThrow();
  return {
    backlog: BACKLOG,
    seconds: round(seconds),
    dials_per_second: round(BACKLOG / seconds, 1),
    cpu_ms_per_1000_dials:
      cpuBefore && cpuAfter
        ? {
            main_thread: round(((cpuAfter.main - cpuBefore.main) * 1000) / BACKLOG, 0),
            process: round(((cpuAfter.all - cpuBefore.all) * 1000) / BACKLOG, 0),
            database: round(((cpuAfter.database - cpuBefore.database) * 1000) / BACKLOG, 0),
          }
        : 'not measured (no /proc)',
    pacing_reslots: reslots,
    runs_dialed: Number(dialed.runs),
    distinct_provider_calls: Number(dialed.calls),
    memory: { at_start: atStart, after_drain: memory },
  };
}

/** The `drain` part: a dispatcher's idle memory, then a dispatcher draining BACKLOG queued runs. */
export async function drainBench(kind: StoreKind) {
  process.stdout.write(`[${kind}] dispatcher: idle memory, then draining ${BACKLOG} queued runs\n`);
  const idle = await idleDispatcher(kind);
  const drain = await setUp(kind);
  try {
    return { idle_memory: idle, ...(await dispatcherThroughput(kind, drain)) };
  } finally {
    await drain.drop();
  }
}
