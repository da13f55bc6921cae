import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { loadConfigText } from '../../src/config/load.js';
import { preflightConfig } from '../../src/config/preflight.js';
import type { Config } from '../../src/config/schema.js';
import { openStore } from '../../src/store/open.js';
import { SCHEMA_VERSION } from '../../src/store/migrations.js';
import { addOwner } from '../store/temp-store.js';
import { testCertificate } from '../support/cert.js';

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-preflight-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function configWith(extra: string): Config {
  const r = loadConfigText(`chains:\n  devnet: { chain_id: 31337, upstreams: [{ url: "http://127.0.0.1:8545" }] }\n${extra}`);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.config;
}

const storageAt = (path: string): string => `storage: { path: ${JSON.stringify(path)} }\n`;

t.test('TLS files: each missing, unusable or mismatched file is named under its key', async (t) => {
  const dir = tempDir(t);
  const db = storageAt(join(dir, 'db.sqlite'));
  const { certFile, keyFile } = testCertificate(t);
  const other = testCertificate(t);
  const tls = (cert: string, key: string, passphrase?: string): Config =>
    configWith(
      db +
        `server: { tls: { cert_file: ${JSON.stringify(cert)}, key_file: ${JSON.stringify(key)}${passphrase ? `, passphrase: ${passphrase}` : ''} } }\n`,
    );
  t.same(preflightConfig(tls(certFile, keyFile)), [], 'a matching pair passes');
  t.same(preflightConfig(tls(join(dir, 'x.pem'), join(dir, 'y.pem'))), [
    `server.tls.cert_file: cannot read ${join(dir, 'x.pem')} (ENOENT)`,
    `server.tls.key_file: cannot read ${join(dir, 'y.pem')} (ENOENT)`,
  ]);
  t.same(preflightConfig(tls(keyFile, keyFile)), [`server.tls.cert_file: ${keyFile} holds no usable PEM certificate (no start line)`]);
  t.same(preflightConfig(tls(certFile, other.keyFile)), [
    `server.tls.key_file: ${other.keyFile} is not the key of the certificate in ${certFile} (key values mismatch)`,
  ]);
  const encrypted = join(dir, 'encrypted.pem');
  execFileSync('openssl', ['pkey', '-in', keyFile, '-aes256', '-passout', 'pass:secret', '-out', encrypted]);
  t.same(preflightConfig(tls(certFile, encrypted)), [
    `server.tls.key_file: ${encrypted} holds no private key that opens (an encrypted key needs server.tls.passphrase): bad decrypt`,
  ]);
  // A wrong passphrase usually fails the decryption's padding check ("bad decrypt"); about once in 256 keys the
  // padding passes and the garbled key fails to parse instead, in OpenSSL's words: only the first part is ours.
  const wrong = preflightConfig(tls(certFile, encrypted, 'wrong'));
  t.equal(wrong.length, 1);
  t.match(wrong[0], `server.tls.key_file: ${encrypted} holds no private key that opens with server.tls.passphrase: `);
  t.same(preflightConfig(tls(certFile, encrypted, 'secret')), [], 'the right passphrase opens it');
});

t.test('storage.path: a directory, or a path through a file, is refused; nothing is created', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'plain'), '');
  t.same(preflightConfig(configWith(storageAt(dir))), [
    `storage.path: ${dir} is a directory; give the path of the database file inside it`,
  ]);
  t.same(preflightConfig(configWith(storageAt(join(dir, 'plain', 'data', 'db.sqlite')))), [
    `storage.path: cannot create ${join(dir, 'plain', 'data', 'db.sqlite')}: ${join(dir, 'plain')} is not a directory`,
  ]);
  const fresh = join(dir, 'new', 'deeper', 'db.sqlite');
  t.same(preflightConfig(configWith(storageAt(fresh))), [], 'missing directories under a writable one are fine');
  t.notOk(existsSync(join(dir, 'new')), 'and are not made by the check');
});

t.test('plans: a plan still used by owners must stay configured', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'db.sqlite');
  const store = openStore(path);
  for (const plan of ['pro', 'pro', 'pro', 'solo', 'free']) addOwner(store.db, 0, plan);
  store.db.prepare(`UPDATE owners SET deleted_at = 1 WHERE plan = 'free'`).run();
  store.close();
  const plans = (names: string[]): string => `plans:\n${names.map((n) => `  ${n}: { rps: 10 }\n`).join('')}`;
  t.same(
    preflightConfig(configWith(storageAt(path) + plans(['growth']))),
    [
      "plans: plan 'pro' is used by 3 owners but is not configured (configure it, or move them to a configured plan with chaingate owner set-plan)",
      "plans: plan 'solo' is used by 1 owner but is not configured (configure it, or move it to a configured plan with chaingate owner set-plan)",
    ],
    "a deleted owner's plan may go",
  );
  t.same(preflightConfig(configWith(storageAt(path) + plans(['pro', 'solo']))), []);
  const newer = join(dir, 'newer.sqlite');
  const raw = new Database(newer);
  raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  raw.close();
  t.same(preflightConfig(configWith(storageAt(newer))), [
    `storage.path: ${newer}: the database schema is version ${SCHEMA_VERSION + 1}, newer than this chaingate (${SCHEMA_VERSION}): upgrade chaingate`,
  ]);
  const garbage = join(dir, 'garbage.sqlite');
  writeFileSync(garbage, 'x'.repeat(200));
  t.same(preflightConfig(configWith(storageAt(garbage))), [`storage.path: cannot read ${garbage} (file is not a database)`]);
});
