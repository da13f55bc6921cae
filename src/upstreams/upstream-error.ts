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
