// The CLI's text output of paged lists: one printer (src/cli/output.ts) for runs, campaigns,
// suppressions, webhook deliveries and the audit log, so each says the same about the next page.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatPage } from '../src/cli/output.js';

describe('The CLI\'s printed pages', () => {
  it('prints the rows as a table and, when there is a next page, the --after that asks for it', () => {
    const text = formatPage({ rows: [{ id: 7, state: 'busy' }, { id: 6, state: 'completed' }], next_after: 6 }, ['id', 'state'], 'No runs.');
    assert.equal(text, 'id  state\n7   busy\n6   completed\n\nMore: --after 6');
  });

  it('prints the empty text for a page without rows, and no --after on the last page', () => {
    assert.equal(formatPage({ rows: [], next_after: null }, ['id'], 'No runs.'), 'No runs.');
    assert.equal(formatPage({ rows: [{ id: 1 }], next_after: null }, ['id'], 'No runs.'), 'id\n1');
  });

  it('puts a note under a table that has rows, before the --after, and never under the empty text', () => {
    assert.equal(formatPage({ rows: [{ id: 1 }], next_after: '+12025550123' }, ['id'], 'None.', '(details: --json)'), 'id\n1\n\n(details: --json)\n\nMore: --after +12025550123');
    assert.equal(formatPage({ rows: [], next_after: null }, ['id'], 'None.', '(details: --json)'), 'None.');
  });
});
