// Starts the example agent runtime from the environment (README.md): where it listens, where
// Dialtone is, where recordings go, how long it listens after the greeting.
import { startAgentRuntime } from './runtime.js';

function integer(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a whole number, not "${text}"`);
  return value;
}

const runtime = await startAgentRuntime({
  host: process.env.HOST ?? '127.0.0.1',
  port: integer('PORT', 8765),
  dialtoneUrl: process.env.DIALTONE_URL ?? 'http://127.0.0.1:3000',
  recordingsDir: process.env.RECORDINGS_DIR ?? './recordings',
  listenMs: integer('LISTEN_MS', 4000),
  speech: process.env.SPEECH !== 'false',
});
process.stdout.write(`example agent runtime listening: start Dialtone with AGENT_RUNTIME_URL=${runtime.url}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void runtime.close().then(() => process.exit(0)));
}
