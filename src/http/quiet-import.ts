// The connection of a CSV import (the suppression list's, a campaign's contacts) stays open while its
// file is checked: shared/csv-body.ts receives the file whole and then reads it in slices, which
// for a large file takes longer than the server's inactivity timeout allows.
import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';

/**
 * Lets the import's connection stay quiet for `timeoutMs` while the received file is checked and
 * written: the server's inactivity timeout (REQUEST_TIMEOUT_MS and a little) would otherwise close
 * it without an answer in the middle of a large import. Node sets the connection's keep-alive
 * timeout again once the answer is sent, so the connection's next requests are not affected.
 */
export function allowQuietImport(request: FastifyRequest, timeoutMs: number): void {
  // Injected requests (app.inject, the tests) have a stand-in socket without timeouts.
  const socket = request.raw.socket as Partial<Socket>;
  if (typeof socket.setTimeout === 'function') socket.setTimeout(timeoutMs);
}
