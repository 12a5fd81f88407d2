// How the media part's parent (bench/parts/media.ts, or a test) drives its child processes (the
// generator, the runtime, the floor): requests over Node's IPC channel, each answered once by the
// child's handler for its type. The children are processes of their own so that their work (tens
// of thousands of packets and messages a second at 200 calls) is not done in the process that
// reads the clock and /proc for the figures, and so that the service and the floor are measured
// with the same peers.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

interface Request {
  id: number;
  type: string;
  args: unknown;
}

type Reply = { id: number; result: unknown } | { id: number; error: string };

export interface MediaChild {
  child: ChildProcess;
  /** Sends a request; resolves with the child's answer, rejects with its error or when it exits first. */
  call<R>(type: string, args?: unknown): Promise<R>;
  /** Ends the child (SIGTERM) and waits for it. */
  stop(): Promise<void>;
}

/** Forks `script` (a file of bench/, run through tsx) with `config` as its argument. */
export function forkMediaChild(script: string, config: unknown): MediaChild {
  const child = fork(fileURLToPath(new URL(script, import.meta.url)), [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let next = 0;
  let exited = false;
  child.on('message', (message: Reply) => {
    const waiting = pending.get(message.id);
    if (!waiting) return;
    pending.delete(message.id);
    if ('error' in message) waiting.reject(new Error(`${script}: ${message.error}`));
    else waiting.resolve(message.result);
  });
  const exitedPromise = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const waiting of pending.values()) waiting.reject(new Error(`${script} exited (${code ?? signal}) before answering`));
      pending.clear();
      resolve();
    }),
  );
  return {
    child,
    call: <R>(type: string, args?: unknown) =>
      new Promise<R>((resolve, reject) => {
        if (exited) return reject(new Error(`${script} has exited`));
        const id = ++next;
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        child.send({ id, type, args } satisfies Request);
      }),
    stop: async () => {
      if (!exited) child.kill('SIGTERM');
      await exitedPromise;
    },
  };
}

/** In a child: answers the parent's requests with `handlers`; exits when the parent goes or sends SIGTERM. */
export function serveMediaRequests(handlers: Record<string, (args: never) => unknown>, onExit: () => void = () => undefined): void {
  process.on('message', (request: Request) => {
    const handler = handlers[request.type];
    Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`no request "${request.type}"`);
        return handler(request.args as never);
      })
      .then(
        (result) => process.send?.({ id: request.id, result: result ?? null } satisfies Reply),
        (error: Error) => process.send?.({ id: request.id, error: error.message } satisfies Reply),
      );
  });
  const exit = () => {
    onExit();
    process.exit(0);
  };
  process.once('SIGTERM', exit);
  process.once('disconnect', exit);
}

/** The config a child was forked with. */
export const childConfig = <T>(): T => JSON.parse(process.argv[2] ?? '{}') as T;
