// node:test's describe, it, before and after, except that a describe skipped with `{ skip: reason }`
// still registers its tests, each skipped with the reason, so the runner's summary counts them
// (node:test does not run the body of a skipped describe: its tests would vanish from the count).
// The hooks of a skipped describe do not run. Test files whose suites can be skipped (no
// PostgreSQL, no Redis, no sipp) import these instead of node:test's.
import * as nodeTest from 'node:test';
import type { TestContext } from 'node:test';

type TestFn = (t: TestContext) => void | Promise<void>;
type HookFn = () => void | Promise<void>;

export interface SuiteOptions {
  /** A reason to skip every test in the describe, or false. */
  skip?: string | false;
}

export interface TestOptions {
  skip?: string | false;
  timeout?: number;
}

/** The reason the describe being defined is skipped, or false. */
let skipping: string | false = false;

export function describe(name: string, fn: () => void): void;
export function describe(name: string, options: SuiteOptions, fn: () => void): void;
export function describe(name: string, optionsOrFn: SuiteOptions | (() => void), maybeFn?: () => void): void {
  const [options, fn] = typeof optionsOrFn === 'function' ? [{}, optionsOrFn] : [optionsOrFn, maybeFn];
  if (!fn) throw new Error(`describe('${name}') has no body`);
  void nodeTest.describe(name, () => {
    const outer = skipping;
    skipping = outer || options.skip || false;
    try {
      fn();
    } finally {
      skipping = outer;
    }
  });
}

export function it(name: string, fn: TestFn): void;
export function it(name: string, options: TestOptions, fn: TestFn): void;
export function it(name: string, optionsOrFn: TestOptions | TestFn, maybeFn?: TestFn): void {
  const [options, fn] = typeof optionsOrFn === 'function' ? [{}, optionsOrFn] : [optionsOrFn, maybeFn];
  void nodeTest.it(name, { ...options, skip: skipping || options.skip || false }, fn);
}

export function before(fn: HookFn): void {
  if (!skipping) nodeTest.before(fn);
}

export function after(fn: HookFn): void {
  if (!skipping) nodeTest.after(fn);
}
