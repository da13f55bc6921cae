/**
 * text/event-stream, read incrementally as the WHATWG HTML standard ("Server-sent events", 9.2.6) reads it, and
 * written back in one canonical form. Lines end with LF, CRLF or CR; a chunk may end anywhere, inside a UTF-8
 * character or between CR and LF. Lines are split on bytes and decoded whole: CR and LF never occur inside a
 * UTF-8 sequence, so a character split across chunks is always joined before it is decoded.
 */

/** One event, dispatched at a blank line. */
export interface SseEvent {
  /** The `event:` field; '' when absent, which EventSource calls "message". */
  event: string;
  /** The `data:` lines joined by LF. An event block without any `data:` line is not dispatched, as the standard says. */
  data: string;
  /** The `id:` field given in this event's block, if any (a value holding NUL is ignored, as the standard says). */
  id: string | undefined;
}

export interface SseParserOptions {
  onEvent(event: SseEvent): void;
  /** A `retry:` field (ASCII digits only): the reconnection delay the server asks for, in ms. */
  onRetry?(ms: number): void;
  /** Most bytes one event may hold while it is read (its kept lines plus the line in progress). Default 16 MiB. */
  maxEventBytes?: number;
}

export interface SseParser {
  /**
   * Reads a chunk, calling onEvent for each event it completes. Returns false once an event has grown past
   * maxEventBytes: the parser then holds nothing and reads nothing more, so the stream must be opened again.
   * Bytes kept across calls are views of the chunk, which must therefore not be reused by the caller.
   */
  push(chunk: Buffer): boolean;
}

export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;

export function createSseParser(opts: SseParserOptions): SseParser {
  const maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  if (!(maxEventBytes > 0) || !Number.isInteger(maxEventBytes)) {
    throw new TypeError('maxEventBytes must be a positive integer');
  }
  const { onEvent, onRetry } = opts;

  // The line in progress, as views of the chunks it arrived in.
  let partial: Buffer[] = [];
  let partialBytes = 0;
  // The last chunk ended with CR: an LF starting the next one belongs to that line end.
  let afterCR = false;
  // A byte order mark is skipped at the start of the stream only.
  let atStart = true;
  let failed = false;

  let data: string[] = [];
  let eventType = '';
  let id: string | undefined;
  // Raw bytes of the lines kept for the event in progress: a bound on what it holds, not its exact size.
  let keptBytes = 0;

  function resetEvent(): void {
    data = [];
    eventType = '';
    id = undefined;
    keptBytes = 0;
  }

  function fail(): false {
    failed = true;
    partial = [];
    partialBytes = 0;
    resetEvent();
    return false;
  }

  function dispatch(): void {
    if (data.length === 0) {
      resetEvent();
      return;
    }
    const event: SseEvent = { event: eventType, data: data.join('\n'), id };
    resetEvent();
    onEvent(event);
  }

  function readLine(line: Buffer): void {
    if (atStart) {
      atStart = false;
      if (line.length >= 3 && line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) line = line.subarray(3);
    }
    if (line.length === 0) {
      dispatch();
      return;
    }
    if (line[0] === COLON) return;
    const colon = line.indexOf(COLON);
    const field = (colon === -1 ? line : line.subarray(0, colon)).toString('utf8');
    let valueStart = colon === -1 ? line.length : colon + 1;
    if (line[valueStart] === 0x20) valueStart++;
    const value = line.toString('utf8', valueStart);
    switch (field) {
      case 'data':
        data.push(value);
        keptBytes += line.length;
        return;
      case 'event':
        eventType = value;
        keptBytes += line.length;
        return;
      case 'id':
        if (!value.includes('\0')) {
          id = value;
          keptBytes += line.length;
        }
        return;
      case 'retry':
        if (/^[0-9]+$/.test(value)) onRetry?.(Number(value));
        return;
      default:
        // Unknown fields are ignored, as the standard says.
        return;
    }
  }

  return {
    push(chunk) {
      if (failed) return false;
      const n = chunk.length;
      let pos = 0;
      if (afterCR && n > 0) {
        afterCR = false;
        if (chunk[0] === LF) pos = 1;
      }
      // Next LF and CR at or after pos: -2 not searched yet, -1 none left in this chunk.
      let nextLF = -2;
      let nextCR = -2;
      while (pos < n) {
        if (nextLF !== -1 && nextLF < pos) nextLF = chunk.indexOf(LF, pos);
        if (nextCR !== -1 && nextCR < pos) nextCR = chunk.indexOf(CR, pos);
        const end = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
        if (end === -1) {
          if (keptBytes + partialBytes + (n - pos) > maxEventBytes) return fail();
          partial.push(pos === 0 ? chunk : chunk.subarray(pos));
          partialBytes += n - pos;
          return true;
        }
        let line = chunk.subarray(pos, end);
        if (partialBytes > 0) {
          partial.push(line);
          line = Buffer.concat(partial, partialBytes + line.length);
          partial = [];
          partialBytes = 0;
        }
        if (keptBytes + line.length > maxEventBytes) return fail();
        if (chunk[end] === CR) {
          if (end + 1 === n) afterCR = true;
          pos = chunk[end + 1] === LF ? end + 2 : end + 1;
        } else {
          pos = end + 1;
        }
        readLine(line);
      }
      return true;
    },
  };
}

/**
 * The bytes a client receives for one event: `event:` (when named), `id:` (when given), one `data:` line per
 * line of data, and the blank line. Parsing them gives back the same event. Names, ids and data lines hold no
 * CR or LF (the parser split on them), so nothing in an event can end its frame early.
 */
export function encodeSseEvent(event: SseEvent): Buffer {
  let text = event.event === '' ? '' : `event: ${event.event}\n`;
  if (event.id !== undefined) text += `id: ${event.id}\n`;
  text += 'data: ' + event.data.replaceAll('\n', '\ndata: ') + '\n\n';
  return Buffer.from(text, 'utf8');
}
