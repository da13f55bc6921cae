import t, { type Test } from 'tap';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { runTenancy } from '../support/tenancy-cli.js';
import { loadConfigFile } from '../../src/config/load.js';
import { validateConfig } from '../../src/config/schema.js';
import { openStore, StoreAccessError } from '../../src/store/open.js';

/**
 * An operator command run by a user who may not read the store says so in one line. Run as root (as the
 * tests usually are), the checks below switch the effective user to nobody, whom a root-owned folder of
 * mode 0700 or a file of mode 0600 keeps out; root itself passes any permission check. Run as anyone
 * else, modes 0 on the folder or the file keep the user out just the same.
 */
const IS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

/** Runs `body` as nobody when root (effective ids only, restored after), else as this user. */
async function asOtherUser<T>(body: () => T | Promise<T>): Promise<T> {
  const { seteuid, setegid } = process;
  if (!IS_ROOT || seteuid === undefined || setegid === undefined) return body();
  setegid(NOBODY);
  seteuid(NOBODY);
  try {
    return await body();
  } finally {
    seteuid(0);
    setegid(0);
  }
}

/** A database made by serve (here: by root or by this user) in a folder of its own. */
function storeIn(t: Test): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-access-'));
  t.teardown(() => {
    chmodSync(dir, 0o700);
    rmSync(dir, { recursive: true, force: true });
  });
  const path = join(dir, 'chaingate.db');
  openStore(path).close();
  return { dir, path };
}

function configFor(path: string) {
  const r = validateConfig({ storage: { path }, chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.config;
}

async function ownerList(path: string): Promise<{ code: number; stderr: string }> {
  const { code, err } = await runTenancy(configFor(path), 'owner', 'list');
  return { code, stderr: err };
}

t.test('the owner of the store opens it (the check refuses no one it should let in)', async (t) => {
  const { path } = storeIn(t);
  const store = openStore(path, { mustExist: true });
  t.equal(store.path, path);
  store.close();
});

t.test('a folder the user may not enter: permission denied, not "no database"', async (t) => {
  const { dir, path } = storeIn(t);
  chmodSync(dir, IS_ROOT ? 0o700 : 0);
  const thrown = await asOtherUser(() => {
    try {
      openStore(path, { mustExist: true }).close();
      return undefined;
    } catch (err) {
      return err;
    }
  });
  t.type(thrown, StoreAccessError);
  const user = IS_ROOT ? 'nobody' : userInfo().username;
  t.equal(
    (thrown as Error).message,
    `permission denied: user ${user} may not read and write the database ${path}; run operator commands as the service's user (sudo -u chaingate chaingate ...)`,
  );
});

t.test('a file the user may not read: the CLI says so in one line and exits 1', async (t) => {
  const { dir, path } = storeIn(t);
  chmodSync(dir, 0o755);
  chmodSync(path, IS_ROOT ? 0o600 : 0);
  const { code, stderr } = await asOtherUser(() => ownerList(path));
  t.equal(code, 1);
  t.equal(stderr.split('\n').filter((l) => l !== '').length, 1, stderr);
  t.match(
    stderr,
    /^chaingate: permission denied: user \S+ may not read and write the database .*chaingate\.db; run operator commands as the service's user \(sudo -u chaingate chaingate \.\.\.\)\n$/,
  );
});

t.test('a missing file in a folder the user may enter is still "no database"', async (t) => {
  const { dir } = storeIn(t);
  const { code, stderr } = await ownerList(join(dir, 'other.db'));
  t.equal(code, 1);
  t.match(stderr, /^chaingate: no database at /);
});

t.test('a config file the user may not read names the service user too', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-access-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'etc'));
  const file = join(dir, 'etc', 'config.yaml');
  writeFileSync(file, 'chains: {}\n', { mode: IS_ROOT ? 0o600 : 0 });
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'etc'), 0o755);
  const result = await asOtherUser(() => loadConfigFile(file));
  t.same(result, {
    ok: false,
    errors: [
      `${file}: cannot read the config file (EACCES); run operator commands as the service's user (sudo -u chaingate chaingate ...)`,
    ],
  });
});
