// The types of the module the console imports as ./vendor-htm-preact.js: htm's standalone build of
// Preact 10 and its hooks, which routes/console.ts serves from the htm package. htm's own
// declarations refer to the preact package, which is not installed (the standalone build bundles
// it), so this declares what the console uses, with Preact's signatures. Not served (not .js).

export interface VNode {
  type: unknown;
  props: unknown;
  key: unknown;
}

/**
 * htm's tagged template. Its holes take any kind of value (text, nodes, handlers, components and
 * their props), so tsc checks what goes into them where it is written, not here.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): VNode;
export function render(tree: VNode, parent: Element): void;

export type StateUpdater<S> = (value: S | ((previous: S) => S)) => void;
export function useState<S>(initial: S | (() => S)): [S, StateUpdater<S>];

/** Runs after render; what it returns, if a function, runs before the next effect or on unmount. */
export type EffectCallback = () => void | (() => void);
export function useEffect(effect: EffectCallback, inputs?: readonly unknown[]): void;

export function useCallback<T extends (...args: never[]) => unknown>(callback: T, inputs: readonly unknown[]): T;

export interface MutableRef<T> {
  current: T;
}
export function useRef<T>(initial: T): MutableRef<T>;

export interface Context<T> {
  Provider: (props: { value: T; children?: unknown }) => VNode | null;
  Consumer: (props: { children: (value: T) => unknown }) => VNode | null;
}
export function createContext<T>(defaultValue: T): Context<T>;
export function useContext<T>(context: Context<T>): T;
