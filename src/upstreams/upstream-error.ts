/**
 * Why an upstream exchange failed:
 * - `connect`: no connection (refused, unreachable, TLS handshake or certificate rejected);
 * - `timeout`: no response head within the request's timeoutMs, or a body silent that long while not paused;
 * - `reset`: the connection was lost before the response was complete, or the upstream was closed;
 * - `protocol`: the upstream's bytes are not a valid HTTP/1.x response.
 */
export type UpstreamErrorKind = 'connect' | 'timeout' | 'reset' | 'protocol';

/** The one error an upstream reports through `ResponseSink.onError`. Messages name the upstream by its label only. */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  readonly kind: UpstreamErrorKind;

  constructor(kind: UpstreamErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.kind = kind;
  }
}

/** What the system errors an operator must act on mean: "EMFILE" alone sends one looking at the node. */
const SYSTEM_CAUSES: Readonly<Record<string, string>> = {
  EMFILE: 'out of file descriptors: the process is at its open-files limit',
  ENFILE: "out of file descriptors: the system's file table is full",
  ENOBUFS: 'out of socket buffers',
  EADDRNOTAVAIL: 'out of local ports',
};

/** A system error the process is short of something for ("EMFILE: out of file descriptors: ..."), else null. */
export function shortageCause(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const meaning = typeof code === 'string' ? SYSTEM_CAUSES[code] : undefined;
  return meaning === undefined ? null : `${code}: ${meaning}`;
}

/** An error's cause as a log says it: a shortage with its meaning, else its code, else its message. */
export function errorCause(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return shortageCause(err) ?? (typeof code === 'string' ? code : err instanceof Error ? err.message : String(err));
}
