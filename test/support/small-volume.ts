/**
 * A real small file system for tests that need a full disk (SQLITE_FULL as a daemon meets it, WAL
 * included, which `PRAGMA max_page_count` cannot show): a tmpfs mounted on a fresh temp directory,
 * unmounted and removed at teardown. Mounting needs root, as CI runs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';

/** Mounts a tmpfs of `size` (mount's syntax: '2m') and returns its directory. */
export function smallVolume(t: Test, size: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-volume-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`cannot mount a ${size} tmpfs (the test needs root): ${(err as Error).message}`);
  }
  t.teardown(async () => {
    // A process that had files open there may take a moment to be gone: a few tries, then a lazy
    // unmount (detached now, freed when the last file closes) so a failed test leaves no mount behind.
    for (let i = 0; ; i++) {
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
        break;
      } catch (err) {
        if (i === 20) {
          execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
          rmSync(dir, { recursive: true, force: true });
          throw new Error(`${dir} was still busy: unmounted lazily (${(err as Error).message})`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
