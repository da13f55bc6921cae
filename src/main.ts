#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { intOption, type ParsedArgs, stringOption } from './cli/args.js';
import { readCommandLine } from './cli/command-line.js';
import { usageErrorText } from './cli/help.js';
import { loadConfigFile, loadStoreConfigFile, type StoreConfig } from './config/load.js';
import { readEnvFile, withEnvFile } from './config/env-file.js';
import { preflightConfig, preflightNotes } from './config/preflight.js';
import type { Config } from './config/schema.js';
import { runStatus, STATUS_EXIT } from './cli/status.js';
import { runUpstream, UPSTREAM_EXIT } from './cli/upstream.js';
import { isStoreCommand, runStoreCommand } from './cli/tenancy.js';
import { copyStore } from './cli/store-copy.js';
import { createLogger, LOG_LEVELS, type Logger, type LogLevel, errorText } from './log.js';
import type { Gateway, ReloadOutcome } from './server/app.js';
import { restartOnlyChanges } from './config/restart-keys.js';
import { uws } from './server/uws.js';

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
  // Loaded here: the gateway's modules (uWS, the pipeline, the chains) are not needed for help or an operator command.
  const { startGateway } = await import('./server/app.js');
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

/** `chaingate store copy --from FILE --to URL`: exit 0 copied, 1 refused, 2 a bad command line. */
async function storeCopy(args: ParsedArgs): Promise<number> {
  const from = stringOption(args, 'from')!;
  const to = stringOption(args, 'to')!;
  if (!/^postgres(ql)?:\/\//.test(to)) {
    process.stderr.write(usageErrorText('--to must be a postgres:// URL', 'store copy'));
    return 2;
  }
  try {
    const report = await copyStore(from, to, (line) => process.stdout.write(`${line}\n`));
    const total = report.rows.reduce((n, r) => n + r.rows, 0);
    process.stdout.write(`copied ${total} rows; balances add up to ${report.balances} RU on both sides\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`chaingate store copy: ${errorText(err)}\n`);
    return 1;
  }
}

/** The log of serve and devnet: CHAINGATE_LOG_LEVEL wins over the config's log.level (a one-off debug run without editing the file). */
function logOrExit(): Logger {
  const envLevel = process.env.CHAINGATE_LOG_LEVEL;
  if (envLevel !== undefined && !(LOG_LEVELS as readonly string[]).includes(envLevel)) {
    process.stderr.write(`chaingate: CHAINGATE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got '${envLevel}')\n`);
    process.exit(1);
  }
  return createLogger((envLevel as LogLevel | undefined) ?? 'info');
}

/** `n chain` or `n chains`. */
const chainsText = (n: number): string => `${n} chain${n === 1 ? '' : 's'}`;

/** Runs the command the command line names (commands.ts); every path ends in process.exit or a running daemon. */
async function main(argv: string[]): Promise<void> {
  const line = readCommandLine(argv);
  if (line.kind === 'help') {
    process.stdout.write(line.text);
    return;
  }
  if (line.kind === 'usage') {
    process.stderr.write(usageErrorText(line.message, line.words));
    process.exit(2);
  }
  const { spec, args, positionals } = line;
  // Every command that reads a config requires --config (commands.ts): the table checked it is here.
  const configPath = stringOption(args, 'config')!;
  if (isStoreCommand(spec)) {
    const config = loadStoreConfigOrExit(configPath, envOrExit(stringOption(args, 'env-file')));
    process.exit(
      await runStoreCommand(
        line,
        config,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      ),
    );
  }
  switch (spec.words) {
    case 'version':
      process.stdout.write(`chaingate ${version()}\n`);
      return;
    case 'store copy':
      process.exit(await storeCopy(args));
      return;
    case 'serve':
      await serve(configPath, envOrExit(stringOption(args, 'env-file')), logOrExit());
      return;
    case 'check-config': {
      const config = loadReadyConfigOrExit(configPath, envOrExit(stringOption(args, 'env-file')));
      process.stdout.write(`${configPath}: valid (${chainsText(Object.keys(config.chains).length)})\n`);
      for (const note of preflightNotes(config)) process.stdout.write(`  ${note}\n`);
      return;
    }
    case 'status':
    case 'upstream cordon':
    case 'upstream uncordon': {
      const [chain, node] = positionals;
      if (spec.words !== 'status' && (chain === undefined || node === undefined)) {
        process.stderr.write(usageErrorText(`missing ${chain === undefined ? 'CHAIN and NODE' : 'NODE'}`, spec.words));
        process.exit(UPSTREAM_EXIT.badArguments);
      }
      // Exit 1 means a chain without a node (or a refused cordon) here, so a config that cannot be read is the other failure, 2.
      const loaded = loadConfigFile(configPath, envOrExit(stringOption(args, 'env-file')));
      if (!loaded.ok) {
        process.stderr.write(`${configPath}: invalid configuration:\n  ${loaded.errors.join('\n  ')}\n`);
        process.exit(STATUS_EXIT.unreachable);
      }
      const out = (s: string): boolean => process.stdout.write(s);
      const err = (s: string): boolean => process.stderr.write(s);
      if (spec.words === 'status') process.exit(await runStatus(loaded.config, configPath, out, err, args.options.has('json')));
      const action = spec.words === 'upstream cordon' ? 'cordon' : 'uncordon';
      process.exit(await runUpstream(loaded.config, configPath, { action, chain: chain!, node: node! }, out, err));
      return;
    }
    case 'devnet': {
      let port: number;
      try {
        port = intOption(args, 'port', 0, 65535) ?? 8080;
      } catch (e) {
        process.stderr.write(usageErrorText(errorText(e), 'devnet'));
        process.exit(2);
      }
      const log = logOrExit();
      uws();
      // Loaded here only: the devnet's beacon node brings Lodestar's types (~0.3 s to import), which serve and the other commands never use.
      const { devnetBanner, startDevnet } = await import('./devnet/devnet.js');
      const devnet = await startDevnet({ port, log });
      process.stdout.write(devnetBanner(devnet));
      stopOnSignal(log, async () => {
        await devnet.stop();
        log.info('stopped');
      });
      return;
    }
    default:
      // A command of the table that main does not run is a bug of this file, not of the command line.
      throw new Error(`command '${spec.words}' has no runner`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`chaingate: ${errorText(err)}\n`);
  process.exit(1);
});
