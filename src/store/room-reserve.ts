import { existsSync, renameSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Room kept on the database's volume for the checkpoint that repairs a full disk (faults.ts). A WAL
 * that filled the volume is given back only by a checkpoint, and a checkpoint copies the WAL's pages
 * into the database file, which grows by the pages the WAL added: with not one byte free it fails,
 * and every write after it, until someone frees space. The reserve is a file of zeros next to the
 * database (`<db>-reserve`; zeros written, not a sparse file, so its blocks are really taken) that a
 * checkpoint failing for room deletes before trying again. It is written again once the volume has
 * room for it twice over, so that taking it back never fills the disk by itself.
 */
export interface RoomReserve {
  /** Deletes the reserve; true when there was one (room was freed). Any connection of the file may. */
  release(): boolean;
  /** Writes the reserve when it is missing and the volume has room for it twice; true when it is in place. */
  restore(): boolean;
}

/** The reserve's path: beside the database, as SQLite's own -wal and -shm files are. */
export function reservePath(dbFile: string): string {
  return `${dbFile}-reserve`;
}

/**
 * The reserve of the database `dbFile`, `bytes` long. With 0 this connection never writes one (a worker
 * thread's, or the operator turned it off) but still releases one it finds.
 */
export function createRoomReserve(dbFile: string, bytes: number): RoomReserve {
  const file = reservePath(dbFile);
  const inPlace = (): boolean => {
    try {
      return statSync(file).size >= bytes;
    } catch {
      return false;
    }
  };
  return {
    release() {
      if (!existsSync(file)) return false;
      rmSync(file, { force: true });
      return true;
    },
    restore() {
      if (bytes === 0) return true;
      if (inPlace()) return true;
      const { bavail, bsize } = statfsSync(dirname(file));
      if (bavail * bsize < 2 * bytes) return false;
      // Written aside and renamed: a reserve cut short by a full disk is never taken for a whole one.
      const part = `${file}.part`;
      try {
        writeFileSync(part, Buffer.alloc(bytes));
        renameSync(part, file);
        return true;
      } catch {
        rmSync(part, { force: true });
        return false;
      }
    },
  };
}
