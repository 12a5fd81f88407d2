// CLI output: `--json` prints machine-readable JSON; otherwise aligned "key  value" lines or a table.

export type Printable = Record<string, unknown>;

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.map(cell).join(', ') || '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export function formatRecord(record: Printable): string {
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  return Object.entries(record)
    .map(([key, value]) => `${key.padEnd(width)}  ${cell(value)}`)
    .join('\n');
}

/**
 * A page of a paged list as every list command prints it: its table (or `empty`), a note under a
 * table that has rows, and how to ask for the next page when there is one (`next_after`).
 */
export function formatPage(page: { rows: Printable[]; next_after: number | string | null }, columns: string[], empty: string, note?: string): string {
  const table = page.rows.length === 0 ? empty : `${formatTable(page.rows, columns)}${note ? `\n\n${note}` : ''}`;
  return page.next_after === null ? table : `${table}\n\nMore: --after ${page.next_after}`;
}

export function formatTable(rows: Printable[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}
