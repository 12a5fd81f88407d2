// Where a JSON Pointer lands in a JSON text, so a validation problem (the API names its place with
// a pointer into the body sent) can be shown at its line in the text the operator typed. Written
// here rather than taken from a library: the console vendors no JSON parser that keeps positions
// (jsonc-parser is several modules and would need a build step or its own asset list), and this
// one only walks text that JSON.parse has already accepted, so it needs no error handling of its own.

/** @typedef {{ start: number, end: number }} Range offsets into the text, end exclusive */

/**
 * A pointer's reference token as written in a pointer (RFC 6901: `~` as `~0`, `/` as `~1`).
 * @param {string} token
 */
function escapeToken(token) {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * Every value of a JSON text by its pointer: an object member's range runs from its name to the
 * end of its value (so its line is the name's), an array element's is the value's.
 * @param {string} text JSON that JSON.parse accepts
 * @returns {Map<string, Range>}
 */
export function valueRanges(text) {
  /** @type {Map<string, Range>} */
  const ranges = new Map();
  let i = 0;
  const skipSpace = () => {
    while (i < text.length && ' \t\n\r'.includes(text.charAt(i))) i++;
  };
  /** A string token from its opening quote; returns its raw text, quotes included. */
  const readString = () => {
    const start = i;
    i++;
    while (text.charAt(i) !== '"') i += text.charAt(i) === '\\' ? 2 : 1;
    i++;
    return text.slice(start, i);
  };
  /**
   * The value starting at i (after spaces), recorded under `pointer` from `from` (its member name's
   * start, or its own start).
   * @param {string} pointer
   * @param {number | undefined} from
   */
  const readValue = (pointer, from) => {
    skipSpace();
    const start = i;
    const c = text.charAt(i);
    if (c === '{') {
      i++;
      skipSpace();
      while (text.charAt(i) !== '}') {
        const nameStart = i;
        const name = /** @type {string} */ (JSON.parse(readString()));
        skipSpace();
        i++; // the colon
        readValue(`${pointer}/${escapeToken(name)}`, nameStart);
        skipSpace();
        if (text.charAt(i) === ',') i++;
        skipSpace();
      }
      i++;
    } else if (c === '[') {
      i++;
      skipSpace();
      for (let index = 0; text.charAt(i) !== ']'; index++) {
        readValue(`${pointer}/${index}`, undefined);
        skipSpace();
        if (text.charAt(i) === ',') i++;
        skipSpace();
      }
      i++;
    } else if (c === '"') {
      readString();
    } else {
      // A number, true, false or null: up to the next delimiter.
      while (i < text.length && !' \t\n\r,]}'.includes(text.charAt(i))) i++;
    }
    ranges.set(pointer, { start: from ?? start, end: i });
  };
  readValue('', undefined);
  return ranges;
}

/**
 * Where `pointer` lands in `text`: its value, or where the nearest enclosing value is when it names
 * something absent (a required field missing is shown at the object that lacks it). Null when the
 * text is not JSON.
 * @param {string} text
 * @param {string} pointer
 * @returns {(Range & { line: number, exact: boolean }) | null}
 */
export function locatePointer(text, pointer) {
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  const ranges = valueRanges(text);
  for (let at = pointer; ; at = at.slice(0, at.lastIndexOf('/'))) {
    const range = ranges.get(at);
    if (range) return { ...range, line: lineAt(text, range.start), exact: at === pointer };
    if (at === '') return null;
  }
}

/**
 * The 1-based line of an offset.
 * @param {string} text
 * @param {number} offset
 */
export function lineAt(text, offset) {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/**
 * Where JSON.parse stopped in `text`, from its error's message (V8 says `at position N`, and
 * `(line L column C)` in newer versions), or null when it does not say.
 * @param {string} text
 * @param {unknown} error
 */
export function syntaxErrorOffset(text, error) {
  const message = error instanceof Error ? error.message : '';
  const position = /at position (\d+)/.exec(message);
  if (position) return Number(position[1]);
  const lineColumn = /line (\d+) column (\d+)/.exec(message);
  if (!lineColumn) return null;
  let offset = 0;
  for (let line = 1; line < Number(lineColumn[1]); line++) offset = text.indexOf('\n', offset) + 1;
  return offset + Number(lineColumn[2]) - 1;
}
