import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** A running anvil node started by chaingate (the devnet, or a test). */
export interface AnvilNode {
  readonly port: number;
  readonly url: string;
  readonly wsUrl: string;
  readonly process: ChildProcess;
  /** Stops the node (SIGTERM, then SIGKILL after 3 s) and resolves when it has exited. */
  stop(): Promise<void>;
}

export interface AnvilOptions {
  chainId?: number;
  /** Seconds between blocks; omitted means a block per transaction (anvil's automine). */
  blockTime?: number;
  /**
   * Records every EVM step, so debug_traceTransaction and its kin answer geth-style struct logs
   * (without it anvil answers them empty). Costs anvil some time per transaction.
   */
  stepsTracing?: boolean;
  /** 0 (default) lets the OS pick a free loopback port. */
  port?: number;
  args?: string[];
  /** Milliseconds to wait for anvil to listen. */
  startTimeoutMs?: number;
  /**
   * Starts anvil in a process group of its own, so a terminal's Ctrl-C (sent to the whole foreground
   * group) reaches only chaingate, which stops the gateway first and anvil after it: anvil gone first
   * would make the gateway log its links lost on the way out. Anvil is then killed when this process exits
   * without stopping it (a second Ctrl-C, an error), though not after a SIGKILL. Default false.
   */
  ownProcessGroup?: boolean;
}

const require = createRequire(import.meta.url);

/** The anvil binary shipped inside @foundry-rs/anvil's platform package. */
export function anvilBinary(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  try {
    return join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
  } catch {
    throw new Error(`anvil is not installed for ${process.platform}-${process.arch} (package ${pkg}); run npm ci`);
  }
}

export function startAnvil(opts: AnvilOptions = {}): Promise<AnvilNode> {
  const args = ['--host', '127.0.0.1', '--port', String(opts.port ?? 0)];
  if (opts.chainId !== undefined) args.push('--chain-id', String(opts.chainId));
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));
  if (opts.stepsTracing === true) args.push('--steps-tracing');
  args.push(...(opts.args ?? []));
  const detached = opts.ownProcessGroup === true;
  const child = spawn(anvilBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'], detached });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (detached) {
    const killOnExit = (): void => {
      child.kill('SIGKILL');
    };
    process.once('exit', killOnExit);
    child.once('exit', () => process.off('exit', killOnExit));
  }
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`anvil did not start within ${opts.startTimeoutMs ?? 15000} ms:\n${out.slice(-2000)}`));
    }, opts.startTimeoutMs ?? 15000);
    const onData = (d: Buffer): void => {
      if (out.length < 65536) out += d.toString();
      const m = /Listening on [^\s:]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        // Keep draining anvil's block log so a full pipe never stalls it.
        child.stdout?.resume();
        const port = Number(m[1]);
        resolve({ port, url: `http://127.0.0.1:${port}`, wsUrl: `ws://127.0.0.1:${port}`, process: child, stop });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => {
      if (out.length < 65536) out += d.toString();
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`anvil exited before listening (code ${code}, signal ${signal}):\n${out.slice(-2000)}`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
