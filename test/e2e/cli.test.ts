/**
 * The built command line: each command's help, argument errors and exit status; check-config and serve
 * refusing bad configs; endpoint create and delete against a running gateway; devnet serving, stopping on
 * a terminal's Ctrl-C and refusing a taken port. Needs `npm run build` (npm test does it).
 */
import t from 'tap';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { COMMANDS } from '../../src/cli/commands.js';
import { commandHelp, overviewHelp } from '../../src/cli/help.js';
import { openStore } from '../../src/store/open.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
if (!existsSync(main)) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');

const dir = mkdtempSync(join(tmpdir(), 'chaingate-cli-'));

t.test('check-config exits 0 for a valid file and 1 listing every error', async (t) => {
  const good = join(dir, 'good.yaml');
  writeFileSync(good, 'chains:\n  devnet:\n    chain_id: 1\n    upstreams: [{ url: "http://127.0.0.1:8545" }]\n');
  const ok = spawnSync(process.execPath, [main, 'check-config', '--config', good], { encoding: 'utf8' });
  t.equal(ok.status, 0);
  t.match(ok.stdout, /valid/);
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'server:\n  port: -1\nchains:\n  mainnet:\n    chain_id: 1\n    upstreams: [{ url: "nope" }]\n');
  const no = spawnSync(process.execPath, [main, 'check-config', '--config', bad], { encoding: 'utf8' });
  t.equal(no.status, 1);
  t.match(no.stderr, /chains\.mainnet\.upstreams\[0\]\.url: must be an http\(s\) URL/);
  t.match(no.stderr, /server\.port: must be an integer from 0 to 65535/);
  const missing = spawnSync(process.execPath, [main, 'check-config', '--config', join(dir, 'absent.yaml')], { encoding: 'utf8' });
  t.equal(missing.status, 1);
  t.match(missing.stderr, /cannot read the config file \(ENOENT\)/);
});

/** Runs the built CLI to its end; a serve that starts listening instead of refusing is stopped after 20 s. */
function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [main, ...args], { cwd: dir, encoding: 'utf8', timeout: 20000 });
}

/** The error lines of an invalid-configuration report, without the indentation. */
function reported(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('  '))
    .map((l) => l.trim());
}

t.test('check-config refuses what serve would fail on or mishandle, and serve refuses it at start, each under its key', async (t) => {
  const chain = (slug: string): string => `  ${slug}: { chain_id: 1, upstreams: [{ url: "http://127.0.0.1:1" }] }\n`;
  const chains = `chains:\n${chain('a')}${chain('b')}`;
  const pure = join(dir, 'pure.yaml');
  writeFileSync(
    pure,
    `server: { port: 47999, default_chain: a }\nmanagement: { port: 47999 }\nru: { methods: { eth_getlogs: 5 } }\n${chains}`,
  );
  const pureErrors = [
    'ru.methods.eth_getlogs: not a method the gateway serves (did you mean eth_getLogs?)',
    'chains.b.chain_id: 1 is already the chain_id of chains.a; each chain needs its own',
    'management.port: 47999 is also server.port on 127.0.0.1; the management listener needs a port of its own',
  ];
  const tlsDir = join(dir, 'no-such-dir');
  const notDir = join(dir, 'a-file');
  writeFileSync(notDir, '');
  const machine = join(dir, 'machine.yaml');
  writeFileSync(
    machine,
    `server: { port: 0, tls: { cert_file: ${tlsDir}/cert.pem, key_file: ${tlsDir}/key.pem } }\n` +
      `storage: { path: ${notDir}/data/chaingate.db }\nchains:\n${chain('a')}`,
  );
  const machineErrors = [
    `server.tls.cert_file: cannot read ${tlsDir}/cert.pem (ENOENT)`,
    `server.tls.key_file: cannot read ${tlsDir}/key.pem (ENOENT)`,
    `storage.path: cannot create ${notDir}/data/chaingate.db: ${notDir} is not a directory`,
  ];
  for (const [file, errors] of [
    [pure, pureErrors],
    [machine, machineErrors],
  ] as const) {
    for (const command of ['check-config', 'serve']) {
      const r = cli([command, '--config', file]);
      t.equal(r.status, 1, `${command} ${file} exits 1`);
      t.same(reported(r.stderr), errors, `${command} names every problem by its key`);
    }
  }
});

t.test('a plans section that drops a plan owners are on is refused by check-config and serve', async (t) => {
  const db = join(dir, 'plans', 'chaingate.db');
  const base = `server: { port: 0 }\nstorage: { path: ${db} }\nchains:\n  devnet: { chain_id: 31337, upstreams: [{ url: "http://127.0.0.1:1" }] }\n`;
  const defaults = join(dir, 'plans-default.yaml');
  writeFileSync(defaults, base);
  // Made as serve makes it: the operator commands refuse a missing database.
  openStore(db).close();
  for (const name of ['one', 'two', 'three'])
    t.equal(cli(['owner', 'create', '--name', name, '--plan', 'growth', '--ru', '0', '--config', defaults]).status, 0);
  const dropped = join(dir, 'plans-dropped.yaml');
  writeFileSync(dropped, `${base}plans:\n  gold: { rps: 10 }\n`);
  for (const command of ['check-config', 'serve']) {
    const r = cli([command, '--config', dropped]);
    t.equal(r.status, 1, `${command} exits 1`);
    t.same(reported(r.stderr), [
      "plans: plan 'growth' is used by 3 owners but is not configured (configure it, or move them to a configured plan with chaingate owner set-plan)",
    ]);
  }
  const kept = join(dir, 'plans-kept.yaml');
  writeFileSync(kept, `${base}plans:\n  gold: { rps: 10 }\n  growth: { rps: 10 }\n`);
  const ok = cli(['check-config', '--config', kept]);
  t.equal(ok.status, 0, ok.stderr);
  t.match(ok.stdout, /valid/);
});

function waitForOutput(child: ChildProcess, pattern: RegExp, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; got:\n${out}`)), ms);
    const onData = (d: Buffer): void => {
      out += d.toString();
      if (pattern.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
  });
}

t.test('chaingate devnet serves an advancing chain and stops cleanly', async (t) => {
  // A process group of its own, as a terminal gives `npm start`: Ctrl-C is sent to the whole group.
  const child = spawn(process.execPath, [main, 'devnet', '--port', '0'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  t.teardown(() => {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const banner = await waitForOutput(child, /Ctrl-C stops/, 30000);
  const m = /JSON-RPC, public:\s+(http:\/\/127\.0\.0\.1:\d+\/v1\/rpc\/public)/.exec(banner);
  t.ok(m, 'the banner prints the URL to call');
  t.match(banner, /curl -s -X POST/, 'and an example curl');
  const url = m![1]!;
  const key = /management key:\s+(\S+)/.exec(banner)?.[1];
  const endpointUrl = /endpoint HTTP URL:\s+(http:\/\/\S+)/.exec(banner)?.[1];
  t.match(banner, /endpoint WS URL:\s+ws:\/\//, 'each URL labelled by its scheme');
  t.notMatch(banner, /HTTPS|WSS/, 'no https or wss label on the devnet, which serves neither');
  t.ok(key && endpointUrl, 'the banner prints a demo management key and endpoint URL');
  const privateCall = await rpc(endpointUrl!, 'eth_chainId');
  t.same(privateCall.json, { jsonrpc: '2.0', id: 1, result: '0x7a69' }, 'the demo endpoint works');
  const account = await send('GET', url.replace('/v1/rpc/public', '/api/dashboard/account'), undefined, { authorization: `Bearer ${key}` });
  t.match(account.json, { data: { name: 'demo', plan: { name: 'growth' } } }, 'and so does its management key');
  const first = BigInt(((await rpc(url, 'eth_blockNumber')).json as { result: string }).result);
  await new Promise((r) => setTimeout(r, 2200));
  const second = BigInt(((await rpc(url, 'eth_blockNumber')).json as { result: string }).result);
  t.ok(second > first, `1-second blocks advance (${first} → ${second})`);
  const byPath = await rpc(url.replace('/v1/', '/devnet/v1/'), 'eth_chainId');
  t.same(byPath.json, { jsonrpc: '2.0', id: 1, result: '0x7a69' });

  // A place to develop against: the keyless path takes a script's burst and a large batch.
  const burst = await Promise.all(Array.from({ length: 60 }, () => rpc(url, 'eth_chainId')));
  t.same(
    burst.filter((r) => r.status !== 200).map((r) => r.status),
    [],
    '60 calls at once on the public path: none refused',
  );
  const batch = JSON.stringify(Array.from({ length: 500 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] })));
  const big = await send('POST', url, batch, { 'content-type': 'application/json' });
  t.equal(big.status, 200, 'a batch of 500 on the public path is served');
  t.equal((big.json as unknown[]).length, 500);
  t.match(banner, /10,000 requests\/s per IP and batches of 1,000/, 'the banner says what the public limits are');

  // The demo owner's key works on the Beacon chain too, at the URL the banner prints.
  const beaconEndpoint = /Beacon endpoint:\s+(\S+)\/eth\/v1\/\.\.\./.exec(banner)?.[1];
  t.ok(beaconEndpoint, 'the banner prints a demo Beacon endpoint');
  const version = await send('GET', `${beaconEndpoint}/eth/v1/node/version`);
  t.equal(version.status, 200, 'the demo key works on devnet-beacon');
  t.match(version.json, { data: { version: /./ } });
  const wrongChain = await send('GET', `${endpointUrl!.replace('/devnet/', '/devnet-beacon/')}/eth/v1/node/version`);
  t.equal(wrongChain.status, 401);
  t.match(wrongChain.json, { code: 401, message: /belongs to network 'devnet'/ }, "a key on another chain's path is told its network");

  // Every command the banner suggests works on a fresh install: no npx, and the WebSocket one runs as printed,
  // from any folder (here one outside the repository, where no node_modules holds ws).
  t.notMatch(banner, /npx/, 'nothing that downloads a package first');
  const wsLine = banner.split('\n').find((l) => / node -e /.test(l));
  t.ok(wsLine, 'a WebSocket example with node');
  const sub = spawn('bash', ['-c', wsLine!.trim()], { cwd: tmpdir(), stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (sub.exitCode === null) sub.kill('SIGKILL');
  });
  const seen = await waitForOutput(sub, /"method":"eth_subscription"/, 15000);
  t.match(seen, /"id":1,"result":"0x[0-9a-f]+"/, 'it subscribes, then receives a new head');

  // Ctrl-C in a terminal: SIGINT to the whole process group, while a subscription holds an upstream link.
  const anvilUrl = /anvil \(chain id \d+, 1-second blocks\) at (\S+)/.exec(banner)![1]!;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  process.kill(-child.pid!, 'SIGINT');
  t.equal(await exited, 0, 'Ctrl-C exits 0');
  sub.kill('SIGKILL');
  const after = output.slice(output.lastIndexOf('\n', output.indexOf('"msg":"stopping"')));
  t.match(after, /"signal":"SIGINT"/);
  t.match(after, /"msg":"stopped"/, 'and logs stopped');
  t.same(
    after.split('\n').filter((l) => /"level":"(warn|error|fatal)"/.test(l)),
    [],
    'quietly: no link lost, anvil stopped after the gateway',
  );
  for (const gone of [url, anvilUrl]) {
    const code = await rpc(gone, 'eth_blockNumber').then(
      () => 'still answering',
      (e: NodeJS.ErrnoException) => e.code,
    );
    t.equal(code, 'ECONNREFUSED', `${gone} is closed`);
  }
});

t.test('chaingate devnet refuses a taken port clearly', async (t) => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  const port = (blocker.address() as { port: number }).port;
  const r = spawnSync(process.execPath, [main, 'devnet', '--port', String(port)], { cwd: dir, encoding: 'utf8', timeout: 30000 });
  t.equal(r.status, 1);
  t.match(r.stderr, new RegExp(`port ${port} .*taken.*--port`));
});

t.test('operator commands: a stored name reaches the terminal escaped, one line per row; names and --ru are checked', async (t) => {
  const db = join(dir, 'operator.db');
  const cfg = join(dir, 'operator.yaml');
  writeFileSync(
    cfg,
    `storage: { path: ${JSON.stringify(db)} }\nchains:\n  devnet:\n    chain_id: 1\n    upstreams: [{ url: "http://127.0.0.1:1" }]\n`,
  );
  const cli = (...args: string[]) => spawnSync(process.execPath, [main, ...args, '--config', cfg], { encoding: 'utf8' });
  openStore(db).close();
  t.equal(cli('owner', 'create', '--name', 'acme', '--plan', 'free', '--ru', '100').status, 0);
  // An endpoint named before names were checked, the way an older version stored it.
  const raw = new Database(db);
  raw
    .prepare(
      `INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at) VALUES (?, 1, 'devnet', ?, ?, 'ABCDEFGH', 0)`,
    )
    .run('ep_aaaaaaaaaaaaaaaa', 'x\nep_forged  1  devnet  \u001b[31mred', Buffer.alloc(32, 1));
  raw.close();
  const list = cli('endpoint', 'list');
  t.equal(list.status, 0, list.stderr);
  t.equal(list.stdout.split('\n').length, 3, 'a header, one row, the final newline');
  // biome-ignore lint/complexity/noAdjacentSpacesInRegex: the forged name spells the table's two-space gaps
  t.match(list.stdout, /\nep_aaaaaaaaaaaaaaaa\s+1\s+devnet\s+x\\nep_forged  1  devnet  \\x1b\[31mred\s+ABCDEFGH…/);
  t.notOk(list.stdout.includes('\u001b'), 'no ESC byte reaches the terminal');

  const named = cli('owner', 'create', '--name', 'evil\u001b]0;title\u0007', '--plan', 'free', '--ru', '1');
  t.equal(named.status, 2);
  t.equal(named.stderr.split('\n')[0], 'chaingate: --name must not contain control, format or line-separator characters (found U+001B)');
  const hex = cli('owner', 'topup', '1', '--ru', '0x10');
  t.equal(hex.status, 2);
  t.equal(hex.stderr.split('\n')[0], 'chaingate: --ru must be a decimal integer from 1 to 9007199254740991');
  t.match(cli('owner', 'list').stdout, /\n1\s+acme\s+free\s+100\s/, 'the balance is unchanged');
});

t.test('every command: --help and help COMMAND print its usage, exit 0; a wrong option exits 2 pointing at it', async (t) => {
  for (const c of COMMANDS) {
    const words = c.words.split(' ');
    const help = cli([...words, '--help']);
    t.same([help.status, help.stderr], [0, ''], `${c.words} --help`);
    t.equal(help.stdout, commandHelp(c), 'its usage only');
    if (c.words === 'help') continue;
    const wrong = cli([...words, '--no-such-option']);
    t.equal(wrong.status, 2, `${c.words} --no-such-option exits 2`);
    t.equal(wrong.stdout, '');
    t.equal(wrong.stderr, `chaingate: unknown option --no-such-option\nRun 'chaingate ${c.words} --help' for usage.\n`);
  }
  const overview = cli(['--help']);
  t.same([overview.status, overview.stdout], [0, overviewHelp()]);
  t.equal(cli([]).stdout, overview.stdout, 'no command: the overview');
  // The other ways of asking (-h, help COMMAND) are read alike in-process: test/cli/commands.test.ts.
  t.equal(cli(['help', 'endpoint', 'create']).stdout, commandHelp(COMMANDS.find((c) => c.words === 'endpoint create')!));
  for (const [argv, stderr] of [
    [['frobnicate'], "chaingate: unknown command 'frobnicate'\nRun 'chaingate --help' for usage.\n"],
    [['serve'], "chaingate: missing --config FILE\nRun 'chaingate serve --help' for usage.\n"],
    [
      ['owner'],
      "chaingate: owner needs a command: create, list, topup, set-plan, suspend, resume, delete, key\nRun 'chaingate owner --help' for usage.\n",
    ],
    [
      ['devnet', '--port', '99999'],
      "chaingate: --port must be a decimal integer from 0 to 65535\nRun 'chaingate devnet --help' for usage.\n",
    ],
    [
      ['upstream', 'cordon', 'devnet', '--config', 'x.yaml'],
      "chaingate: missing NODE\nRun 'chaingate upstream cordon --help' for usage.\n",
    ],
  ] as const) {
    const r = cli([...argv]);
    t.same([r.status, r.stdout, r.stderr], [2, '', stderr], argv.join(' '));
  }
});

t.test('chaingate version and --version print the package version', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  for (const argv of [['version'], ['--version']]) {
    const r = cli(argv);
    t.same([r.status, r.stdout, r.stderr], [0, `chaingate ${pkg.version}\n`, ''], argv.join(' '));
  }
});

t.test('check-config counts "1 chain"; a YAML error names the file, the line and what is wrong', async (t) => {
  const one = join(dir, 'one-chain.yaml');
  writeFileSync(one, 'chains:\n  devnet:\n    chain_id: 1\n    upstreams: [{ url: "http://127.0.0.1:8545" }]\n');
  t.equal(cli(['check-config', '--config', one]).stdout.split('\n')[0], `${one}: valid (1 chain)`);
  const broken = join(dir, 'broken.yaml');
  writeFileSync(broken, 'server:\n  port: 8080\nchains:\n  devnet: { chain_id: 1\n');
  for (const command of ['check-config', 'serve', 'owner list']) {
    const r = cli([...command.split(' '), '--config', broken]);
    t.equal(r.status, 1, `${command} exits 1`);
    const [head, line, end] = r.stderr.split('\n');
    t.equal(head, `${broken}: invalid configuration:`);
    t.match(line, new RegExp(`^  YAML: ${broken}, line 5, column 1: \\S.*[^:]$`), `${command}: complete, no dangling colon`);
    t.equal(end, '');
  }
});

t.test('endpoint create and delete by the built CLI, against a running gateway on the same store', async (t) => {
  const anvil = await anvilFor(t);
  const db = join(dir, 'running.db');
  const g = await gatewayFor(t, { storage: { path: db }, chains: { devnet: evmChain([anvil.url]) } });
  const cfg = join(dir, 'running.yaml');
  writeFileSync(
    cfg,
    `storage: { path: ${JSON.stringify(db)} }\nchains:\n  devnet: { chain_id: 31337, upstreams: [{ url: "${anvil.url}" }] }\n`,
  );
  const run = (...args: string[]) => cli([...args, '--config', cfg]);
  t.equal(run('owner', 'create', '--name', 'acme', '--plan', 'free', '--ru', '1000').status, 0);
  const made = run('endpoint', 'create', '--owner', '1', '--name', 'web');
  t.equal(made.status, 0, made.stderr);
  const [, id, key] =
    /^endpoint (ep_\w+) created for owner 1 on devnet\nAPI key \(shown once, keep it secret\): (\w+)\n$/.exec(made.stdout) ?? [];
  t.ok(id && key, made.stdout);
  const url = `${g.base}/v1/rpc/${key}`;
  t.same((await rpc(url, 'eth_chainId')).json, { jsonrpc: '2.0', id: 1, result: '0x7a69' }, 'the key works at once');
  const deleted = run('endpoint', 'delete', id!);
  t.same([deleted.status, deleted.stdout], [0, `endpoint ${id} deleted: its key is refused from now on\n`]);
  await waitFor(async () => (await rpc(url, 'eth_chainId')).status === 401, { what: 'the deleted key refused' });
  const again = run('endpoint', 'delete', id!);
  t.same([again.status, again.stderr], [1, `chaingate: no endpoint ${id}\n`]);
});
