// How many frames wait in SQLite's write-ahead log, read from its WAL-index (the `-shm` file).
//
// SQLite tells a connection nothing about its WAL's length short of checkpointing, and
// better-sqlite3 exposes no WAL hook; counting commits misjudges it (one group commit of 200 runs
// writes thousands of pages). The WAL-index header is a documented, stable format
// (https://www.sqlite.org/walformat.html): in native byte order, `mxFrame` (the last valid frame)
// at offset 16 of the header, and `nBackfill` (frames already copied into the database) at offset
// 96, in the checkpoint information that follows the header's two copies. Their difference is
// what a checkpoint would copy; both return to zero when the WAL is restarted. One 136-byte read
// of a page SQLite keeps mapped: a microsecond or two after a commit.
import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';

const HEADER_BYTES = 136;
/** `iVersion` of the WAL-index header SQLite writes (3.7.0 onwards). */
const WAL_INDEX_VERSION = 3_007_000;

export class WalIndex {
  private fd: number | undefined;
  private readonly buffer = Buffer.alloc(HEADER_BYTES);
  private readonly read32 = endianness() === 'LE' ? (offset: number) => this.buffer.readUInt32LE(offset) : (offset: number) => this.buffer.readUInt32BE(offset);

  constructor(private readonly shmPath: string) {}

  /** Frames in the WAL not yet copied into the database; 0 before the WAL-index exists. */
  pendingFrames(): number {
    if (!this.readHeader()) return 0;
    return Math.max(0, this.read32(16) - this.read32(96));
  }

  /** Frames in the WAL, copied into the database or not (`mxFrame`): 0 once it is restarted. */
  frames(): number {
    return this.readHeader() ? this.read32(16) : 0;
  }

  /** False before the WAL-index exists or while SQLite has not finished writing its header. */
  private readHeader(): boolean {
    try {
      this.fd ??= openSync(this.shmPath, 'r');
    } catch {
      return false;
    }
    if (readSync(this.fd, this.buffer, 0, HEADER_BYTES, 0) < HEADER_BYTES) return false;
    // isInit (offset 12): a header SQLite has not finished writing says nothing yet.
    return this.read32(0) === WAL_INDEX_VERSION && this.buffer[12] === 1;
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
