// Template fields of a definition: `{{name}}`, `{{a.b}}`, `{{name | fallback}}`.
// Hand-written because the syntax is this small and must not execute anything: general template
// engines (Handlebars, Liquid) bring helpers and partials we would have to disable.

export type TemplateContext = Record<string, unknown>;

const PLACEHOLDER = /\{\{\s*([^{}|]*?)\s*(?:\|\s*([^{}]*?)\s*)?\}\}/g;
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

export interface Placeholder {
  path: string;
  fallback: string | undefined;
}

export function placeholders(template: string): Placeholder[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => ({ path: m[1] ?? '', fallback: m[2] }));
}

/** Problems with a template's syntax, in words; empty when it is well formed. */
export function templateProblems(template: string): string[] {
  const problems: string[] = [];
  for (const { path } of placeholders(template)) {
    if (!PATH.test(path)) problems.push(`"{{${path}}}" is not a variable name (letters, digits, _ and dots).`);
  }
  const stripped = template.replace(PLACEHOLDER, '');
  if (stripped.includes('{{') || stripped.includes('}}')) problems.push('Unbalanced "{{" or "}}".');
  return problems;
}

function lookup(context: TemplateContext, path: string): unknown {
  let value: unknown = context;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Fills a template. A missing value takes its fallback, or becomes empty text. */
export function renderTemplate(template: string, context: TemplateContext): string {
  return template.replace(PLACEHOLDER, (_whole, path: string, fallback: string | undefined) => {
    const value = lookup(context, path);
    if (value === undefined || value === null) return fallback ?? '';
    return typeof value === 'string' ? value : JSON.stringify(value);
  });
}
