// CSV import bodies (the suppression list's, a campaign's contacts): received whole, then read
// line by line in slices that yield to the event loop, so that a million-line file never holds the
// node for more than a slice (CSV_IMPORT_SLICE_LINES) at a time.
//
// Why received whole first: reading while receiving throttles the upload to the pace of the checks
// (tens of microseconds a number), and a large file then misses REQUEST_TIMEOUT_MS (408) although
// the network delivered it in a second. The file is bounded (the route's byte limit), and the
// checks then run with the connection's quiet time extended (CSV_IMPORT_TIMEOUT_MS, see
// http/quiet-import.ts). While it arrives, chunk by chunk, each line's length and its bytes (UTF-8)
// are checked, so an endless line is refused after CSV_IMPORT_MAX_LINE_BYTES, not after the whole
// file, and no step takes the whole file in one turn of the event loop.
import { Readable, finished } from 'node:stream';
import { isUtf8 } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { parse as parseCsv, CsvError } from 'csv-parse';
import { DialtoneError, validationFailed } from '../errors.js';

export interface CsvBodyOptions {
  /** Largest body, in bytes (413 above it); `limitName` names the setting in the refusal. */
  maxBytes: number;
  limitName: string;
  /** Longest line, in bytes (CSV_IMPORT_MAX_LINE_BYTES). */
  maxLineBytes: number;
  /** Lines read between two yields to the event loop (CSV_IMPORT_SLICE_LINES). */
  sliceLines: number;
  /** How a header cell becomes a column name (trimmed, and lower-cased for the suppressions). */
  columnName: (cell: string) => string;
  /** The column every file must have, and what to say when it has not. */
  requiredColumn: string;
  headerHint: string;
  /** Each chunk as it arrives (the contacts import hashes them for its Idempotency-Key). */
  onChunk?: (chunk: Buffer) => void;
  /** Yields to the event loop between slices; a test may observe the slices through it. */
  yieldToLoop?: () => Promise<unknown>;
  /** The clock, in milliseconds, a slice's length is read on (performance.now); a test may set it. */
  now?: () => number;
}

export interface CsvLine {
  /** The line the record starts on (the header is line 1). */
  line: number;
  /** The record's cells by column name; a line with fewer cells leaves the rest undefined. */
  record: Record<string, string | undefined>;
}

/** Bytes csv-parse is fed at a time: each piece is parsed at once, without a yield (4 KiB: some 200 lines, under a millisecond once compiled). */
const FEED_BYTES = 4 * 1024;
/**
 * Longest slice, in milliseconds: a slice also ends, before `sliceLines` records, once it has run
 * this long. The first slices of a process run libphonenumber's and csv-parse's code before V8 has
 * compiled it, several times slower than the steady 8 ms a slice of 250 numbers costs (40-50 ms
 * measured), and a slow or busy machine slows every slice.
 */
export const SLICE_MS = 10;
const NEWLINE = 0x0a;
const EMPTY = Buffer.alloc(0);

function notCsv(detail: string): DialtoneError {
  return validationFailed([{ pointer: '', detail }], 'The body is not valid CSV.');
}

/** What `receive` hands over: the body's chunks as they arrived, and the first line that is not UTF-8, if any. */
interface Received {
  chunks: Buffer[];
  notUtf8Line: number | undefined;
}

/**
 * Receives the whole body, refusing it as soon as it is larger than `maxBytes` (413) or a line is
 * longer than `maxLineBytes` (422). An upload the client cuts off is refused with 400.
 * Each chunk is checked as it arrives, never the whole body in one turn: a 19 MB body concatenated
 * and checked at once held the event loop some 75 ms. Its line lengths are read by its newlines'
 * positions, and its bytes checked as UTF-8 up to its last newline (a newline byte is never part
 * of a multi-byte character, so a check that ends at one never cuts a character); the bytes after
 * it are checked with the next chunk's.
 * Listeners, not for-await: leaving a for-await destroys the request, and its socket with it, so
 * the refusal could not be answered.
 */
function receive(body: Readable, options: CsvBodyOptions): Promise<Received> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let line = 1;
    let lineBytes = 0;
    // The bytes after the last newline checked as UTF-8 (the current line's, so at most maxLineBytes), and their line.
    let unchecked: Buffer[] = [];
    let uncheckedLine = 1;
    let notUtf8Line: number | undefined;
    const checkUtf8 = (bytes: Buffer) => {
      if (notUtf8Line === undefined && !isUtf8(bytes)) notUtf8Line = uncheckedLine + firstLineNotUtf8(bytes) - 1;
    };
    let settled = false;
    const settle = (error: DialtoneError | undefined) => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      stopWatching();
      if (error) reject(error);
      else resolve({ chunks, notUtf8Line });
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > options.maxBytes) return settle(new DialtoneError('payload_too_large', `The CSV is larger than ${options.maxBytes} bytes (${options.limitName}).`));
      let lastNewline = -1;
      for (let from = 0; ; ) {
        const newline = chunk.indexOf(NEWLINE, from);
        lineBytes += (newline === -1 ? chunk.length : newline) - from;
        if (lineBytes > options.maxLineBytes) {
          return settle(notCsv(`Line ${line} is longer than ${options.maxLineBytes} bytes (CSV_IMPORT_MAX_LINE_BYTES).`));
        }
        if (newline === -1) break;
        line += 1;
        lineBytes = 0;
        lastNewline = newline;
        from = newline + 1;
      }
      if (lastNewline === -1) {
        unchecked.push(chunk);
      } else {
        const upToNewline = chunk.subarray(0, lastNewline + 1);
        checkUtf8(unchecked.length === 0 ? upToNewline : Buffer.concat([...unchecked, upToNewline]));
        unchecked = [chunk.subarray(lastNewline + 1)];
        uncheckedLine = line;
      }
      options.onChunk?.(chunk);
      chunks.push(chunk);
    };
    const onEnd = () => {
      checkUtf8(Buffer.concat(unchecked));
      settle(undefined);
    };
    body.on('data', onData);
    body.once('end', onEnd);
    // finished() also reports a body cut off before these listeners were attached.
    const stopWatching = finished(body, { writable: false }, (error) => {
      if (error) settle(new DialtoneError('bad_request', 'The upload ended before its end; nothing was imported.'));
    });
  });
}

/** The first line of `text` holding a byte sequence that is not UTF-8, counting from 1 (lines split at newline bytes, which UTF-8 never uses inside a character). */
function firstLineNotUtf8(text: Buffer): number {
  let line = 1;
  for (let start = 0; start <= text.length; line++) {
    const newline = text.indexOf(NEWLINE, start);
    const end = newline === -1 ? text.length : newline;
    if (!isUtf8(text.subarray(start, end))) return line;
    if (newline === -1) break;
    start = newline + 1;
  }
  return line;
}

/** The chunks in pieces of FEED_BYTES at most, each chunk let go once fed. */
function* pieces(chunks: Buffer[]): Generator<Buffer> {
  for (let i = 0; i < chunks.length; i++) {
    const chunk = chunks[i] as Buffer;
    chunks[i] = EMPTY;
    for (let start = 0; start < chunk.length; start += FEED_BYTES) yield chunk.subarray(start, start + FEED_BYTES);
  }
}

const LINE_BREAKS = /\r\n|\r|\n/g;
const count = (text: string, pattern: RegExp) => text.match(pattern)?.length ?? 0;

/**
 * The body's records after its header, each with the line it starts on. Refuses a body that is
 * empty, not UTF-8 or not CSV, or whose header lacks the required column; a header alone yields
 * nothing. Between slices of `sliceLines` records (fewer once a slice has run SLICE_MS) it yields to the event loop, so the caller's
 * work on each record is sliced too.
 */
export async function* readCsvBody(body: Readable, options: CsvBodyOptions): AsyncGenerator<CsvLine, void, undefined> {
  const yieldToLoop = options.yieldToLoop ?? nextTurn;
  const { chunks, notUtf8Line } = await receive(body, options);
  await yieldToLoop();
  if (notUtf8Line !== undefined) throw notCsv(`Line ${notUtf8Line} is not valid UTF-8; save the file as UTF-8.`);

  const parser = parseCsv({
    bom: true,
    // A line with a missing or extra cell is reported as that line's problem, not the file's.
    relax_column_count: true,
    skip_empty_lines: true,
    trim: true,
    info: true,
    max_record_size: options.maxLineBytes,
  });
  Readable.from(pieces(chunks)).pipe(parser);

  let columns: string[] | undefined;
  // csv-parse counts a CRLF inside a quoted cell as two lines (it counts the CR and the LF alone
  // there, and the pair as one only between records), so its line numbers run one too high after
  // each: the surplus is taken off here, and the record's own line breaks, to give its first line.
  let surplus = 0;
  let sinceYield = 0;
  const now = options.now ?? (() => performance.now());
  let sliceStarted = now();
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      let breaks = 0;
      for (const cell of record) {
        if (cell.includes('\n') || cell.includes('\r')) {
          breaks += count(cell, LINE_BREAKS);
          surplus += count(cell, /\r\n/g);
        }
      }
      const line = info.lines - surplus - breaks;
      if (columns === undefined) {
        columns = record.map(options.columnName);
        if (!columns.includes(options.requiredColumn)) throw missingColumn(options);
        continue;
      }
      const named: Record<string, string | undefined> = {};
      columns.forEach((name, index) => {
        named[name] = record[index];
      });
      yield { line, record: named };
      if (++sinceYield >= options.sliceLines || now() - sliceStarted >= SLICE_MS) {
        sinceYield = 0;
        await yieldToLoop();
        sliceStarted = now();
      }
    }
  } catch (error) {
    if (error instanceof CsvError) {
      const line = (error as CsvError & { lines?: number }).lines;
      const detail = error.code === 'CSV_MAX_RECORD_SIZE' ? `A record is longer than ${options.maxLineBytes} bytes (CSV_IMPORT_MAX_LINE_BYTES)` : error.message;
      throw notCsv(`Not valid CSV${line === undefined ? '' : ` at line ${line - surplus}`}: ${detail}`);
    }
    throw error;
  } finally {
    parser.destroy();
  }
  if (columns === undefined) {
    throw validationFailed([{ pointer: '', detail: `The first line must be a header naming a ${options.requiredColumn} column${options.headerHint}.` }], 'The CSV is empty.');
  }
}

function missingColumn(options: CsvBodyOptions): DialtoneError {
  return validationFailed(
    [{ pointer: '', detail: `The first line must be a header naming a ${options.requiredColumn} column${options.headerHint}.` }],
    `The CSV has no ${options.requiredColumn} column.`,
  );
}
