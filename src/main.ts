#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { intOption, parseArgs, stringOption } from './cli/args.js';
import { loadConfigFile, loadStoreConfigFile, type StoreConfig } from './config/load.js';
import { readEnvFile, withEnvFile } from './config/env-file.js';
import { preflightConfig, preflightNotes } from './config/preflight.js';
import type { Config } from './config/schema.js';
import { runStatus, STATUS_EXIT } from './cli/status.js';
import { runUpstream, UPSTREAM_EXIT, UPSTREAM_USAGE } from './cli/upstream.js';
import { runTenancyCommand, TENANCY_COMMANDS, TENANCY_USAGE } from './cli/tenancy.js';
import { copyStore, STORE_USAGE } from './cli/store-copy.js';
import { createLogger, LOG_LEVELS, type Logger, type LogLevel, errorText } from './log.js';
import { type Gateway, type ReloadOutcome, startGateway } from './server/app.js';
import { restartOnlyChanges } from './config/restart-keys.js';
import { uws } from './server/uws.js';

const USAGE = `chaingate: a gateway in front of Ethereum execution and consensus nodes

Usage:
  chaingate serve --config FILE         run the gateway (what the systemd unit runs)
  chaingate check-config --config FILE  validate a config file and what it names (TLS files, storage, plans
                                        in use); exit 0 when valid, 1 with every error
  chaingate status --config FILE        ask the running daemon (its metrics listener) how each chain and
                                        upstream is doing; exit 0 ready, 1 a chain without a node, 2 unreachable
${UPSTREAM_USAGE}
  chaingate devnet [--port N]           run a local anvil devnet with the gateway in front (npm start)
  chaingate --version

A relative storage.path is read from the config file's folder. Only serve creates the database (the
devnet makes its own); every other command refuses a missing one. --env-file FILE (any command that
takes --config) reads a systemd EnvironmentFile (KEY=VALUE lines, # comments, optional quotes) for the
config's \${NAME} references; its variables win over the process environment, as the unit's
EnvironmentFile makes the service's. Operator commands read only the config's storage and plans, so a
\${NAME} elsewhere (an upstream's token) need not be set for them.

${TENANCY_USAGE}
${STORE_USAGE}`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Stops `stop` on the first SIGTERM/SIGINT and exits 0 when it is done; a second signal exits at once. */
function stopOnSignal(log: Logger, stop: () => Promise<unknown>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.warn('second signal: exiting now', { signal });
      process.exit(1);
    }
    stopping = true;
    log.info('stopping', { signal });
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('stop failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

function exitInvalid(path: string, errors: readonly string[]): never {
  process.stderr.write(`${path}: invalid configuration:\n  ${errors.join('\n  ')}\n`);
  process.exit(1);
}

/** Loads a config file, or lists every error with its key path and exits 1. */
function loadConfigOrExit(path: string, env: NodeJS.ProcessEnv): Config {
  const loaded = loadConfigFile(path, env);
  if (loaded.ok) return loaded.config;
  exitInvalid(path, loaded.errors);
}

/** The storage and plans of a config file (what the operator commands use), or every error and exit 1. */
function loadStoreConfigOrExit(path: string, env: NodeJS.ProcessEnv): StoreConfig {
  const loaded = loadStoreConfigFile(path, env);
  if (loaded.ok) return loaded.config;
  exitInvalid(path, loaded.errors);
}

/** The environment for `${NAME}` references: the process's, and the --env-file's variables over it; exit 1 when that file is wrong. */
function envOrExit(envFile: string | undefined): NodeJS.ProcessEnv {
  if (envFile === undefined) return process.env;
  const read = readEnvFile(envFile);
  if (read.ok) return withEnvFile(process.env, read.vars);
  process.stderr.write(`${envFile}: invalid env file:\n  ${read.errors.join('\n  ')}\n`);
  process.exit(1);
}

/**
 * Loads a config file and checks it against this machine (TLS files, storage, plans in use), or lists
 * every error and exits 1: what serve runs at start and check-config reports, so the two agree.
 */
function loadReadyConfigOrExit(path: string, env: NodeJS.ProcessEnv): Config {
  const config = loadConfigOrExit(path, env);
  const errors = preflightConfig(config);
  if (errors.length > 0) exitInvalid(path, errors);
  return config;
}

async function serve(configPath: string, env: NodeJS.ProcessEnv, log: Logger): Promise<void> {
  const config = loadReadyConfigOrExit(configPath, env);
  if (process.env.CHAINGATE_LOG_LEVEL === undefined) log.setLevel(config.log.level);
  uws();
  const gateway = await startGateway(config, { log });
  log.info('config loaded', { file: configPath, chains: Object.keys(config.chains).join(',') });
  log.info('listening', { address: `${config.server.tls ? 'https' : 'http'}://${config.server.host}:${gateway.port}` });
  if (gateway.metricsPort !== undefined)
    log.info('metrics listening', { address: `http://${config.metrics!.host}:${gateway.metricsPort}/metrics` });
  gateway.context.metrics.configLoaded(Date.now());
  reloadOnHangup(configPath, env, config, gateway, log);
  for (const chain of gateway.context.chains.values()) {
    log.info('chain', { slug: chain.config.slug, kind: chain.config.kind, upstreams: chain.upstreams.map((u) => u.label).join(',') });
  }
  stopOnSignal(log, async () => {
    const cut = await gateway.stop();
    log.info('stopped', { cut_requests: cut });
  });
}

/**
 * SIGHUP (systemctl reload) reads the config file again and applies it when it is valid whole, checks
 * out on this machine (preflightConfig) and changes nothing that needs a restart; otherwise nothing
 * changes and every error is logged with its key path. Each outcome is counted in
 * chaingate_config_reloads_total. The environment stays the one read at start (--env-file is not read
 * again), as a service's EnvironmentFile is read when systemd starts it.
 */
function reloadOnHangup(path: string, env: NodeJS.ProcessEnv, started: Config, gateway: Gateway, log: Logger): void {
  let running = started;
  const metrics = gateway.context.metrics;
  // One reload at a time: a second SIGHUP during one waits for it, then reads the file again.
  let reloading: Promise<void> = Promise.resolve();
  process.on('SIGHUP', () => {
    reloading = reloading.then(() => reloadOnce());
  });
  const reloadOnce = async (): Promise<void> => {
    const loaded = loadConfigFile(path, env);
    const errors = loaded.ok ? preflightConfig(loaded.config) : loaded.errors;
    if (loaded.ok && errors.length === 0) errors.push(...restartOnlyChanges(running, loaded.config));
    if (!loaded.ok || errors.length > 0) {
      for (const error of errors) log.error('config reload refused: the running config stays', { file: path, error });
      metrics.configReload(false, Date.now());
      return;
    }
    const next = loaded.config;
    let outcome: ReloadOutcome;
    try {
      outcome = await gateway.reload(next);
    } catch (err) {
      log.error('config reload refused: the running config stays', { file: path, error: errorText(err) });
      metrics.configReload(false, Date.now());
      return;
    }
    if (process.env.CHAINGATE_LOG_LEVEL === undefined) log.setLevel(next.log.level);
    running = next;
    metrics.configReload(true, Date.now());
    log.info('config reloaded', {
      file: path,
      chains_added: outcome.added.join(',') || undefined,
      chains_removed: outcome.removed.join(',') || undefined,
      chains_changed: outcome.changed.join(',') || undefined,
    });
  };
}

/** The value of option `--name` in a command line that main does not parse itself. */
function optionArg(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === `--${name}`) return argv[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(`--${name}=`.length);
  }
  return undefined;
}

/** `chaingate store copy --from FILE --to URL`: exit 0 copied, 1 refused, 2 a bad command line. */
async function storeCommand(argv: readonly string[]): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv, ['from', 'to'], ['help']);
  } catch (err) {
    process.stderr.write(`chaingate store: ${errorText(err)}\n`);
    return 2;
  }
  if (args.options.has('help')) {
    process.stdout.write(STORE_USAGE);
    return 0;
  }
  const [sub, ...extra] = args.positionals;
  const from = stringOption(args, 'from');
  const to = stringOption(args, 'to');
  const problem =
    sub !== 'copy'
      ? `unknown store command '${sub ?? ''}' (store copy)`
      : extra.length > 0
        ? `unexpected argument '${extra[0]}'`
        : from === undefined
          ? 'missing --from FILE'
          : to === undefined || !/^postgres(ql)?:\/\//.test(to)
            ? '--to must be a postgres:// URL'
            : null;
  if (problem !== null) {
    process.stderr.write(`chaingate store: ${problem}\n\n${STORE_USAGE}`);
    return 2;
  }
  try {
    const report = await copyStore(from!, to!, (line) => process.stdout.write(`${line}\n`));
    const total = report.rows.reduce((n, r) => n + r.rows, 0);
    process.stdout.write(`copied ${total} rows; balances add up to ${report.balances} RU on both sides\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`chaingate store copy: ${errorText(err)}\n`);
    return 1;
  }
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'store') process.exit(await storeCommand(argv.slice(1)));
  if (argv[0] !== undefined && TENANCY_COMMANDS.has(argv[0])) {
    if (argv.includes('--help')) {
      process.stdout.write(TENANCY_USAGE);
      return;
    }
    const path = optionArg(argv, 'config');
    if (path === undefined) throw new Error(`${argv[0]} needs --config FILE`);
    const code = await runTenancyCommand(
      argv,
      loadStoreConfigOrExit(path, envOrExit(optionArg(argv, 'env-file'))),
      (s) => process.stdout.write(s),
      (s) => process.stderr.write(s),
    );
    process.exit(code);
  }
  // CHAINGATE_LOG_LEVEL wins over the config's log.level: a one-off debug run without editing the file.
  const envLevel = process.env.CHAINGATE_LOG_LEVEL;
  if (envLevel !== undefined && !(LOG_LEVELS as readonly string[]).includes(envLevel))
    throw new Error(`CHAINGATE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got '${envLevel}')`);
  const log = createLogger((envLevel as LogLevel | undefined) ?? 'info');
  const args = parseArgs(argv, ['config', 'port', 'env-file'], ['help', 'version']);
  const [command] = args.positionals;
  if (args.options.has('version')) {
    process.stdout.write(`chaingate ${version()}\n`);
    return;
  }
  if (args.options.has('help') || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const configPath = stringOption(args, 'config');
  const env = envOrExit(stringOption(args, 'env-file'));
  switch (command) {
    case 'serve':
      if (!configPath) throw new Error('serve needs --config FILE');
      await serve(configPath, env, log);
      return;
    case 'check-config': {
      if (!configPath) throw new Error('check-config needs --config FILE');
      const config = loadReadyConfigOrExit(configPath, env);
      process.stdout.write(`${configPath}: valid (${Object.keys(config.chains).length} chains)\n`);
      for (const note of preflightNotes(config)) process.stdout.write(`  ${note}\n`);
      return;
    }
    case 'status': {
      if (!configPath) throw new Error('status needs --config FILE');
      // Exit 1 means a chain without a node here, so a config that cannot be read is the other failure, 2.
      const loaded = loadConfigFile(configPath, env);
      if (!loaded.ok) {
        process.stderr.write(`${configPath}: invalid configuration:\n  ${loaded.errors.join('\n  ')}\n`);
        process.exit(STATUS_EXIT.unreachable);
      }
      const code = await runStatus(
        loaded.config,
        configPath,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
      process.exit(code);
      return;
    }
    case 'upstream': {
      if (!configPath) throw new Error('upstream needs --config FILE');
      const loaded = loadConfigFile(configPath, env);
      if (!loaded.ok) {
        process.stderr.write(`${configPath}: invalid configuration:\n  ${loaded.errors.join('\n  ')}\n`);
        process.exit(UPSTREAM_EXIT.unreachable);
      }
      const code = await runUpstream(
        loaded.config,
        configPath,
        args.positionals.slice(1),
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
      process.exit(code);
      return;
    }
    case 'devnet': {
      uws();
      const port = intOption(args, 'port', 0, 65535) ?? 8080;
      // Loaded here only: the devnet's beacon node brings Lodestar's types (~0.3 s to import), which serve and the other commands never use.
      const { devnetBanner, startDevnet } = await import('./devnet/devnet.js');
      const devnet = await startDevnet({ port, log });
      process.stdout.write(devnetBanner(devnet));
      stopOnSignal(log, () => devnet.stop());
      return;
    }
    default:
      throw new Error(`unknown command '${command}'\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`chaingate: ${errorText(err)}\n`);
  process.exit(1);
});
