// An organization's suppression (do-not-call) list: numbers it must not call, each optionally
// until a moment (`expires_at`). Numbers are normalized exactly as a run's phone_number is
// (shared/phone-number.ts), so the checks match by equality. The HTTP routes and the CLI both use
// these functions; another organization's suppressions are never visible.
import type { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { parseDestination } from '../shared/phone-number.js';
import type { Config } from '../config.js';
import { DialtoneError, validationFailed } from '../errors.js';
import { readCsvBody } from '../shared/csv-body.js';
import { ShardedMap } from '../shared/sharded-map.js';
import type { SuppressionRow } from '../store/schema/schema.js';
import {
  deleteSuppression,
  selectSuppression,
  selectSuppressionPage,
  upsertSuppression,
  upsertSuppressions,
  type SuppressionValues,
} from '../store/statements/suppression-statements.js';
import type { Store } from '../store/engine/store.js';

export interface SuppressionContext {
  store: Store;
  clock: { now(): number };
}

export interface SuppressionView {
  phone_number: string;
  reason: string | null;
  expires_at: string | null;
  /** False once `expires_at` has passed: the number may be called again. */
  active: boolean;
  created_at: string;
  updated_at: string;
}

/** Longest `reason` kept. */
export const REASON_MAX_LENGTH = 500;

const iso = (ms: number): string => new Date(ms).toISOString();

function viewOf(row: SuppressionRow, now: number): SuppressionView {
  return {
    phone_number: row.phone_number,
    reason: row.reason,
    expires_at: row.expires_at === null ? null : iso(row.expires_at),
    active: row.expires_at === null || row.expires_at > now,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** The E.164 form of a number given for the list, or why it is not one. */
export function normalizeSuppressedNumber(input: string): { ok: true; value: string } | { ok: false; detail: string } {
  const parsed = parseDestination(input);
  if (!parsed.ok) return parsed;
  if (parsed.destination.kind !== 'e164') return { ok: false, detail: `"${input}" is a SIP URI; only phone numbers are suppressed.` };
  return { ok: true, value: parsed.destination.value };
}

function numberOrNotFound(input: string): string {
  const normalized = normalizeSuppressedNumber(input);
  if (!normalized.ok) throw new DialtoneError('suppression_not_found', `No suppression of "${input}": ${normalized.detail}`);
  return normalized.value;
}

export interface SuppressionInput {
  reason?: string | null | undefined;
  /** ISO 8601 date-time, or null: never expires. */
  expires_at?: string | null | undefined;
}

/** Suppresses a number (or replaces its reason and expiry): idempotent. */
export async function putSuppression(ctx: SuppressionContext, orgId: number, phoneNumber: string, input: SuppressionInput): Promise<SuppressionView> {
  const normalized = normalizeSuppressedNumber(phoneNumber);
  if (!normalized.ok) throw new DialtoneError('invalid_phone_number', normalized.detail, { errors: [{ pointer: '/phone_number', detail: normalized.detail }] });
  const now = ctx.clock.now();
  const expiresAt = parseExpiry(input.expires_at ?? null, now);
  if (!expiresAt.ok) throw validationFailed([{ pointer: '/expires_at', detail: expiresAt.detail }]);
  const reason = input.reason ?? null;
  if (reason !== null && reason.length > REASON_MAX_LENGTH) throw validationFailed([{ pointer: '/reason', detail: `Is longer than ${REASON_MAX_LENGTH} characters.` }]);
  // The upsert returns the row as written (created_at kept when it replaced one): no second read.
  const row = await ctx.store.transaction('durable', (trx) => upsertSuppression(trx, { orgId, phoneNumber: normalized.value, reason, expiresAt: expiresAt.value }, now));
  return viewOf(row, now);
}

function parseExpiry(text: string | null, now: number): { ok: true; value: number | null } | { ok: false; detail: string } {
  if (text === null || text === '') return { ok: true, value: null };
  // A date-time with its offset (RFC 3339), so nobody's local time zone is guessed.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(text)) {
    return { ok: false, detail: `"${text}" is not a date-time with a time zone (RFC 3339, e.g. 2027-01-31T00:00:00Z).` };
  }
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) return { ok: false, detail: `"${text}" is not a valid date-time.` };
  if (ms <= now) return { ok: false, detail: `"${text}" has passed; a suppression must expire in the future, or never.` };
  return { ok: true, value: ms };
}

export async function getSuppression(ctx: SuppressionContext, orgId: number, phoneNumber: string): Promise<SuppressionView> {
  const value = numberOrNotFound(phoneNumber);
  const row = await selectSuppression(ctx.store, orgId, value);
  if (!row) throw new DialtoneError('suppression_not_found', `No suppression of ${value}.`);
  return viewOf(row, ctx.clock.now());
}

export async function removeSuppression(ctx: SuppressionContext, orgId: number, phoneNumber: string): Promise<void> {
  const value = numberOrNotFound(phoneNumber);
  if (!(await deleteSuppression(ctx.store, orgId, value))) throw new DialtoneError('suppression_not_found', `No suppression of ${value}.`);
}

export interface SuppressionPage {
  data: SuppressionView[];
  /** Pass as `after` for the next page; null on the last. */
  next_after: string | null;
}

/** The organization's suppressions (expired ones too) in number order, `limit` at a time after `after`. */
export async function listSuppressions(ctx: SuppressionContext, orgId: number, page: { after?: string | undefined; limit: number }): Promise<SuppressionPage> {
  const rows = await selectSuppressionPage(ctx.store, orgId, page.after, page.limit + 1);
  const now = ctx.clock.now();
  const data = rows.slice(0, page.limit).map((row) => viewOf(row, now));
  return { data, next_after: rows.length > page.limit ? (data[data.length - 1]?.phone_number ?? null) : null };
}

export interface ImportLimits {
  /** Largest CSV accepted, in bytes (413 payload_too_large above it). */
  maxBytes: number;
  /** Most lines after the header, every line counted (422 above it). */
  maxLines: number;
  /** Longest line, in bytes (422 above it). */
  maxLineBytes: number;
  /** Lines checked, and rows written, between two yields to the event loop. */
  sliceLines: number;
  /** Most invalid lines listed in the answer (all are counted). */
  maxInvalidListed: number;
  /** Test seam: how the import yields to the event loop between slices. */
  yieldToLoop?: () => Promise<unknown>;
}

export interface InvalidLine {
  line: number;
  value: string;
  detail: string;
}

export interface ImportResult {
  /** Distinct numbers written (a number on several lines counts once; its last line wins). */
  imported: number;
  invalid: InvalidLine[];
  /** Every invalid line, listed or not. */
  invalid_count: number;
}

/** The import's limits as configured. */
export function importLimitsOf(config: Pick<Config, 'SUPPRESSION_IMPORT_MAX_BYTES' | 'SUPPRESSION_IMPORT_MAX_LINES' | 'CSV_IMPORT_MAX_LINE_BYTES' | 'CSV_IMPORT_SLICE_LINES' | 'SUPPRESSION_IMPORT_MAX_INVALID_LISTED'>): ImportLimits {
  return {
    maxBytes: config.SUPPRESSION_IMPORT_MAX_BYTES,
    maxLines: config.SUPPRESSION_IMPORT_MAX_LINES,
    maxLineBytes: config.CSV_IMPORT_MAX_LINE_BYTES,
    sliceLines: config.CSV_IMPORT_SLICE_LINES,
    maxInvalidListed: config.SUPPRESSION_IMPORT_MAX_INVALID_LISTED,
  };
}

/**
 * Imports a CSV of numbers: a header row naming a `phone_number` column, and optionally `reason`
 * and `expires_at` (RFC 3339). The body is received whole (shared/csv-body.ts), then checked in
 * slices, keeping only the valid numbers; they are written once all is checked, so a body refused
 * part-way (too large, too many lines, not CSV) changes nothing. Lines that are not valid numbers
 * are reported by line and skipped; the rest are imported. A header alone imports nothing.
 */
export async function importSuppressions(ctx: SuppressionContext, orgId: number, body: Readable, limits: ImportLimits): Promise<ImportResult> {
  const yieldToLoop = limits.yieldToLoop ?? nextTurn;
  const now = ctx.clock.now();
  // The numbers in the order of their first line, each with its last line's values, and where
  // each number sits in that array. Not one Map: see shared/sharded-map.ts. Written in this order,
  // which is the file's: an order scattered across the index cost longer writes.
  const rows: SuppressionValues[] = [];
  const indexOf = new ShardedMap<number>();
  const invalid: InvalidLine[] = [];
  let invalidCount = 0;
  const reject = (line: number, value: string, detail: string) => {
    invalidCount += 1;
    if (invalid.length < limits.maxInvalidListed) invalid.push({ line, value, detail });
  };

  let lines = 0;
  const records = readCsvBody(body, {
    maxBytes: limits.maxBytes,
    limitName: 'SUPPRESSION_IMPORT_MAX_BYTES',
    maxLineBytes: limits.maxLineBytes,
    sliceLines: limits.sliceLines,
    columnName: (cell) => cell.trim().toLowerCase(),
    requiredColumn: 'phone_number',
    headerHint: ' (and optionally reason, expires_at)',
    yieldToLoop,
  });
  for await (const { line, record } of records) {
    // Every line counts, repeated and invalid ones too: each costs the check.
    if (++lines > limits.maxLines) {
      throw validationFailed([{ pointer: '', detail: `Line ${line}: an import holds at most ${limits.maxLines} lines after the header (SUPPRESSION_IMPORT_MAX_LINES); split the file.` }], 'Too many lines in one import.');
    }
    const raw = record.phone_number ?? '';
    const number = normalizeSuppressedNumber(raw);
    if (!number.ok) {
      reject(line, raw, raw === '' ? 'No phone_number on this line.' : number.detail);
      continue;
    }
    const reason = record.reason === undefined || record.reason === '' ? null : record.reason;
    if (reason !== null && reason.length > REASON_MAX_LENGTH) {
      reject(line, raw, `The reason is longer than ${REASON_MAX_LENGTH} characters.`);
      continue;
    }
    const expiresAt = parseExpiry(record.expires_at ?? null, now);
    if (!expiresAt.ok) {
      reject(line, raw, expiresAt.detail);
      continue;
    }
    const values = { orgId, phoneNumber: number.value, reason, expiresAt: expiresAt.value };
    const seen = indexOf.get(number.value);
    if (seen === undefined) indexOf.set(number.value, rows.push(values) - 1);
    else rows[seen] = values;
  }

  // A transaction per slice, yielding between them: on SQLite each statement runs on the event
  // loop and holds the one connection. Only the last is durable: its flush makes the earlier
  // relaxed commits durable too (the WAL is flushed in order, on both stores), so the answer still
  // comes only once every row is on the disk.
  for (let start = 0; start < rows.length; start += limits.sliceLines) {
    const slice = rows.slice(start, start + limits.sliceLines);
    const last = start + limits.sliceLines >= rows.length;
    await ctx.store.transaction(last ? 'durable' : 'relaxed', (trx) => upsertSuppressions(trx, slice, now));
    if (!last) {
      await yieldToLoop();
      await ctx.store.betweenBulkWrites();
    }
  }
  return { imported: rows.length, invalid, invalid_count: invalidCount };
}
