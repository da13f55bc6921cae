/**
 * A Server-Sent Events client as a Beacon consumer holds one: a single HTTP GET that it reads for as
 * long as the stream lasts and never reopens, so a test can tell a kept stream from a re-made one.
 */
import { request, type IncomingHttpHeaders } from 'node:http';

export interface StreamEvent {
  event: string;
  data: string;
}

export interface EventStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** Events received so far, in arrival order (comment lines left out). */
  events: StreamEvent[];
  /** Comment lines (`: …`) received so far. */
  comments: number;
  /** The last comment line received, as sent (`: keep-alive`); '' before any. */
  lastComment: string;
  /** The whole body when the answer was not a stream (an error's JSON). */
  text(): string;
  /** True once the gateway ended or cut the stream. */
  ended(): boolean;
  /** Leaves: destroys the socket. */
  close(): void;
  /** Stops reading the socket (its kernel buffers fill), and reads again. */
  pause(): void;
  resume(): void;
}

/**
 * Opens `url` and resolves once the answer's head arrived; events then accumulate in `events`. Rejects
 * when the head takes longer than `headMs`: a server must show the stream open before its first event.
 */
export function openEventStream(url: string, headers: Record<string, string> = {}, headMs = 5000): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no response head from ${url} within ${headMs} ms`));
    }, headMs);
    const req = request(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      clearTimeout(timer);
      let buffer = '';
      let whole = '';
      let isEnded = false;
      const end = (): void => {
        isEnded = true;
      };
      const stream: EventStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: 0,
        lastComment: '',
        text: () => whole,
        ended: () => isEnded,
        close: () => req.destroy(),
        pause: () => void res.socket.pause(),
        resume: () => void res.socket.resume(),
      };
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        whole += text;
        buffer += text;
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          if (frame.startsWith(':')) {
            stream.comments++;
            stream.lastComment = frame;
            continue;
          }
          let event = 'message';
          const data: string[] = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          stream.events.push({ event, data: data.join('\n') });
        }
      });
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
      resolve(stream);
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end();
  });
}
