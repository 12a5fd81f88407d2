// CSV in the browser: reading a file the operator chose (RFC 4180: quoted cells, doubled quotes,
// line breaks inside quotes, CRLF or LF, a UTF-8 byte-order mark), and writing lines, either for the
// API (cells exactly as they are) or for a spreadsheet (cells that a spreadsheet would run as a
// formula are made text first).

/**
 * The rows of a CSV text, each an array of cells; blank lines are left out.
 * @param {string} text
 * @returns {string[][]}
 */
export function parseCsv(text) {
  /** @type {string[][]} */
  const rows = [];
  /** @type {string[]} */
  let row = [];
  let cell = '';
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const endRow = () => {
    row.push(cell);
    if (row.length > 1 || row[0] !== '') rows.push(row);
    row = [];
    cell = '';
  };
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else cell += c;
    } else if (c === '"' && cell === '') quoted = true;
    else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\n') endRow();
    else if (c === '\r') {
      if (text[i + 1] === '\n') i++;
      endRow();
    } else cell += c;
  }
  if (cell !== '' || row.length > 0) endRow();
  return rows;
}

/**
 * One CSV cell, quoted when it must be.
 * @param {string} value
 */
function quote(value) {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/**
 * A cell a spreadsheet shows as text: one that starts with = + - @ (or a tab or carriage return,
 * which some spreadsheets skip before looking) would be read as a formula, and a formula in an
 * exported file can run commands or send the sheet's data elsewhere when opened. A leading
 * apostrophe makes it text, as OWASP's advice on CSV injection says.
 * @param {string} value
 */
export function spreadsheetSafe(value) {
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
}

/**
 * One line of CSV (with its CRLF).
 * @param {readonly (string | number | null | undefined)[]} cells
 * @param {{ spreadsheet?: boolean }} [options] spreadsheet: escape cells that would be formulas
 */
export function csvLine(cells, { spreadsheet = false } = {}) {
  return `${cells.map((c) => quote(spreadsheet ? spreadsheetSafe(String(c ?? '')) : String(c ?? ''))).join(',')}\r\n`;
}
