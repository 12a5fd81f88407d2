import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, ConfigSchema, loadConfig, webhooksMayUsePrivateNetworks } from '../src/config.js';

/** The variables a ConfigError names, in order. */
function namedVariables(error: unknown): string[] {
  assert.ok(error instanceof ConfigError, `a ConfigError, not ${String(error)}`);
  return error.problems.map((problem) => problem.split(':')[0] ?? '');
}

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `a ConfigError, not ${String(error)}`);
    return error;
  }
  assert.fail(`accepted ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('gives the documented defaults for an empty environment', () => {
    const config = loadConfig({});
    assert.equal(config.DATABASE_URL, 'sqlite:./data/dialtone.db');
    assert.equal(config.HOST, '127.0.0.1');
    assert.equal(config.PORT, 3000);
    assert.equal(config.BODY_LIMIT_BYTES, 64 * 1024);
    assert.equal(config.INITIAL_CONTEXT_MAX_BYTES, 16 * 1024);
    assert.equal(config.INITIAL_CONTEXT_MAX_DEPTH, 8);
    assert.equal(config.NODE_ENV, 'development');
    assert.equal(config.LOG_LEVEL, 'info');
    assert.equal(config.DIALTONE_FIRST_RUN_DEMO, 'auto');
    assert.equal(config.DIALTONE_ROLE, 'all');
    assert.equal(config.API_KEY_LAST_USED_WRITE_INTERVAL_MS, 60_000);
    assert.equal(config.DIALTONE_SECRET_KEY, undefined);
    assert.equal(config.PUBLIC_BASE_URL, undefined);
  });

  it('refuses private networks to webhooks unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true is set, whatever NODE_ENV says', () => {
    for (const NODE_ENV of [undefined, 'development', 'production', 'test']) {
      const env = NODE_ENV === undefined ? {} : { NODE_ENV };
      assert.equal(webhooksMayUsePrivateNetworks(loadConfig(env)), false, `NODE_ENV=${NODE_ENV}`);
      assert.equal(webhooksMayUsePrivateNetworks(loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' })), false, `NODE_ENV=${NODE_ENV}`);
      assert.equal(webhooksMayUsePrivateNetworks(loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })), true, `NODE_ENV=${NODE_ENV}`);
    }
  });

  it('reads only the environment it is given, and treats an empty value as unset', () => {
    assert.equal(loadConfig({ PORT: '' }).PORT, 3000);
    assert.equal(loadConfig({ DATABASE_URL: '' }).DATABASE_URL, 'sqlite:./data/dialtone.db');
    assert.equal(loadConfig({ SOMETHING_ELSE: 'x' }).PORT, 3000, 'unknown variables are ignored');
  });

  it('converts numbers from their string form', () => {
    const config = loadConfig({ PORT: '8080', BODY_LIMIT_BYTES: '2048', INITIAL_CONTEXT_MAX_DEPTH: '3', SIMULATOR_TALK_MS: '0' });
    assert.equal(config.PORT, 8080);
    assert.equal(config.BODY_LIMIT_BYTES, 2048);
    assert.equal(config.INITIAL_CONTEXT_MAX_DEPTH, 3);
    assert.equal(config.SIMULATOR_TALK_MS, 0);
    assert.equal(typeof config.PORT, 'number');
  });

  it('reads every numeric variable back from the decimal text of its default', () => {
    const numeric = Object.entries(ConfigSchema.properties).filter(([, schema]) => schema.type === 'integer' || schema.type === 'number');
    assert.ok(numeric.length > 20);
    for (const [key, schema] of numeric) {
      const value: unknown = schema.default;
      assert.equal(typeof value, 'number', `${key} has a numeric default`);
      assert.equal(loadConfig({ [key]: String(value) })[key as keyof ReturnType<typeof loadConfig>], value, key);
    }
  });

  it('accepts both store URLs and every documented enumeration value', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://u@h:5432/db' }).DATABASE_URL, 'postgres://u@h:5432/db');
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).DATABASE_URL, 'postgresql://u@h/db');
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite:/tmp/x.db' }).DATABASE_URL, 'sqlite:/tmp/x.db');
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) assert.equal(loadConfig({ LOG_LEVEL: level }).LOG_LEVEL, level);
    for (const role of ['all', 'api', 'dispatcher']) assert.equal(loadConfig({ DIALTONE_ROLE: role }).DIALTONE_ROLE, role);
  });

  it('refuses bad values with one ConfigError that lists every bad variable at once', () => {
    const error = refusal({ PORT: 'abc', BODY_LIMIT_BYTES: '-1', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', HOST: 'localhost' });
    assert.deepEqual(namedVariables(error).sort(), ['BODY_LIMIT_BYTES', 'DATABASE_URL', 'LOG_LEVEL', 'PORT']);
    assert.match(error.message, /^Invalid configuration:\n/);
    for (const [variable, value] of [['PORT', 'abc'], ['BODY_LIMIT_BYTES', '-1'], ['DATABASE_URL', 'mysql://x'], ['LOG_LEVEL', 'loud']]) {
      const line = error.problems.find((p) => p.startsWith(`${variable}:`)) ?? '';
      assert.ok(line.includes(value ?? ''), `the problem with ${variable} shows the value given: ${line}`);
      assert.ok(error.message.includes(line), 'the message carries every problem');
    }
  });

  it('refuses numbers out of their range', () => {
    assert.deepEqual(namedVariables(refusal({ PORT: '65536', INITIAL_CONTEXT_MAX_DEPTH: '0', BODY_LIMIT_BYTES: '1023' })).sort(), [
      'BODY_LIMIT_BYTES',
      'INITIAL_CONTEXT_MAX_DEPTH',
      'PORT',
    ]);
  });

  it('refuses a number that is not a whole decimal number instead of truncating it', () => {
    for (const value of ['80.5', '1e3', '2.5e3', '0x50', 'true', '8080abc']) {
      const error = refusal({ PORT: value, SHUTDOWN_GRACE_MS: value });
      assert.deepEqual(namedVariables(error).sort(), ['PORT', 'SHUTDOWN_GRACE_MS'], `PORT=${value}`);
    }
  });

  it('refuses unknown enumeration values and malformed URLs', () => {
    const error = refusal({ NODE_ENV: 'prod', DIALTONE_ROLE: 'worker', DIALTONE_FIRST_RUN_DEMO: 'yes', PUBLIC_BASE_URL: 'ftp://x' });
    assert.deepEqual(namedVariables(error).sort(), ['DIALTONE_FIRST_RUN_DEMO', 'DIALTONE_ROLE', 'NODE_ENV', 'PUBLIC_BASE_URL']);
  });
  it('refuses settings that contradict each other, naming both', () => {
    for (const [env, words] of [
      [{ DIAL_TIMEOUT_MS: '30000', DISPATCH_LEASE_MS: '30000' }, /DIAL_TIMEOUT_MS \(30000\) must be shorter than DISPATCH_LEASE_MS/],
      [{ NODE_HEARTBEAT_TIMEOUT_MS: '10000', REAPER_INTERVAL_MS: '5000' }, /NODE_HEARTBEAT_TIMEOUT_MS \(10000\) must exceed twice REAPER_INTERVAL_MS/],
      [{ DISPATCH_SHUTDOWN_MS: '15000' }, /DISPATCH_SHUTDOWN_MS \(15000\) must be shorter than SHUTDOWN_GRACE_MS \(15000\)/],
      [{ HEADERS_TIMEOUT_MS: '40000' }, /HEADERS_TIMEOUT_MS \(40000\) must not exceed REQUEST_TIMEOUT_MS \(30000\)/],
    ] as const) {
      assert.match(refusal(env).message, words);
    }
    assert.doesNotThrow(() => loadConfig({ NODE_HEARTBEAT_TIMEOUT_MS: '10001', REAPER_INTERVAL_MS: '5000', DISPATCH_SHUTDOWN_MS: '14999', HEADERS_TIMEOUT_MS: '30000' }));
  });
});
