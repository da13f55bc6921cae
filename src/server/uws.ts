import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as UwsTypes from '@trufflesuite/uws-js-unofficial';

export type Uws = typeof UwsTypes;
export type {
  HttpRequest,
  HttpResponse,
  TemplatedApp,
  WebSocket,
  WebSocketBehavior,
  us_listen_socket,
} from '@trufflesuite/uws-js-unofficial';
import { errorText } from '../log.js';

/**
 * Builds of uWebSockets.js, newest first. `@btc-vision/uwebsockets.js` carries Node 20-25 binaries but
 * needs glibc 2.38; `@trufflesuite/uws-js-unofficial` carries Node 16-20 binaries for any glibc.
 */
export const UWS_BUILDS = ['@btc-vision/uwebsockets.js', '@trufflesuite/uws-js-unofficial'] as const;

const require = createRequire(import.meta.url);

/**
 * Where an installed package keeps its one uWS binary: `npm pack` (systemd/package/prepack.mjs) copies the
 * build that loads on the packing host into dist/vendor/uws/ and leaves both npm packages out of the
 * tarball, which would otherwise install some 230 MB of binaries for every platform. A checkout has no
 * such folder until it is packed, and then loads the npm packages as before.
 */
export const VENDORED_UWS = fileURLToPath(new URL('../vendor/uws/', import.meta.url));

/** The vendored binary's build.json: which package and version it came from, and its file name. */
interface VendoredBuild {
  package: string;
  version: string;
  binary: string;
}

/** The builds to try: the vendored binary first when there is one, then the npm packages. */
function defaultBuilds(): string[] {
  const manifest = `${VENDORED_UWS}build.json`;
  if (!existsSync(manifest)) return [...UWS_BUILDS];
  const build = JSON.parse(readFileSync(manifest, 'utf8')) as VendoredBuild;
  return [`${VENDORED_UWS}${build.binary}`, ...UWS_BUILDS];
}

/**
 * The trufflesuite package never throws: without a matching binary it returns a pure-JS stand-in that
 * lacks SSLApp and never upgrades WebSockets. Only the native addon has all of these.
 */
function isNative(mod: unknown): mod is Uws {
  const m = mod as Record<string, unknown> | null;
  return !!m && typeof m.App === 'function' && typeof m.SSLApp === 'function' && typeof m.getParts === 'function';
}

function glibcVersion(): string {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ?? 'unknown';
}

/** Loads the first native uWebSockets.js build that works on this host, or throws one message saying why none did. */
export function loadUws(builds: readonly string[] = defaultBuilds()): Uws {
  const failures: string[] = [];
  for (const name of builds) {
    // The fallback path of one build prints its own warnings; they would only confuse an operator here.
    const { warn, log } = console;
    console.warn = () => {};
    console.log = () => {};
    try {
      const mod: unknown = require(name);
      if (isNative(mod)) return mod;
      failures.push(`${name}: no native binary for this platform (only a JavaScript stand-in loaded)`);
    } catch (err) {
      failures.push(
        `${name}: ${
          errorText(err)
            .split('\n')
            .find((l) => l.trim()) ?? 'failed to load'
        }`,
      );
    } finally {
      console.warn = warn;
      console.log = log;
    }
  }
  throw new Error(
    `chaingate needs a native uWebSockets.js build, and none loads on Node ${process.version} ` +
      `(ABI ${process.versions.modules}, ${process.platform}-${process.arch}, glibc ${glibcVersion()}):\n  - ` +
      failures.join('\n  - ') +
      '\nUse Node 20 (any glibc) or Node 22/24 on glibc >= 2.38.',
  );
}

let cached: Uws | undefined;
/** The process-wide uWS module, loaded once. */
export function uws(): Uws {
  cached ??= loadUws();
  return cached;
}

/**
 * Closes every socket of `app`, listen sockets and connections alike. Both builds have App.close(); the
 * older build's typings do not list it.
 */
export function closeApp(app: UwsTypes.TemplatedApp): void {
  (app as unknown as { close(): void }).close();
}
