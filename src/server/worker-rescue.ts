/**
 * Ending a worker thread that cannot end itself (stuck in a loop, paused by a debugger, late at a stop)
 * without taking the process down.
 *
 * Why it needs care: a worker's uWS sockets are libuv poll handles on the worker's own loop, and uWS's
 * cleanup at the end of a thread does not close them. Node closes a worker's loop as the thread ends and
 * aborts the whole process when a handle is still open ("uv_loop_close() while having open handles"). So
 * `Worker.terminate()` is only safe once the worker itself has closed its apps — and a stuck worker runs
 * none of its own code.
 *
 * The inspector can still run code in it: a message to a worker's inspector session is dispatched through
 * a V8 interrupt, which a thread busy in JavaScript handles between two statements, and a thread paused by
 * a debugger handles in its pause loop. So the main thread attaches to the worker (NodeWorker domain of an
 * in-process session, no --inspect needed), evaluates the worker's abandon hook there (it ships the usage
 * rows and closes every socket, on the worker's own thread), lets a paused worker run again, and only then
 * terminates it. A worker that does not run the hook within the time given (stuck inside a native call, where
 * V8 handles no interrupt) is not terminated: that would abort the process; the caller tries again later.
 */
import { Session } from 'node:inspector';
import type { Worker } from 'node:worker_threads';

/** The global a worker thread sets (worker-thread.ts): ships its usage rows and closes every uWS socket now. */
export const ABANDON_HOOK = 'chaingate.worker.abandon';

interface InspectorReply {
  id?: number;
  method?: string;
  error?: { message: string };
  result?: { result?: { value?: unknown } };
}

/**
 * Closes worker `worker`'s sockets from inside it through the inspector, then terminates it. Resolves true
 * once the thread ended; false (the worker left running) when the hook did not run within `timeoutMs`.
 */
export function rescueWorker(worker: Worker, timeoutMs: number): Promise<boolean> {
  let session: Session;
  try {
    session = new Session();
    session.connect();
  } catch {
    // A Node built without the inspector: the worker cannot be asked, so it is not ended.
    return Promise.resolve(false);
  }
  return new Promise<boolean>((resolve) => {
    let finished = false;
    const finish = (ended: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      session.disconnect();
      resolve(ended);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    session.on('NodeWorker.attachedToWorker', ({ params }) => {
      const sessionId = params.sessionId;
      // The inspector's workerId is its own count, not the threadId; its title names the thread.
      if (params.workerInfo.title !== `[worker ${worker.threadId}]`) {
        session.post('NodeWorker.detach', { sessionId });
        return;
      }
      let nextId = 0;
      const waiting = new Map<number, (reply: InspectorReply) => void>();
      const send = (method: string, args: Record<string, unknown> = {}): Promise<InspectorReply> =>
        new Promise((answered) => {
          const id = ++nextId;
          waiting.set(id, answered);
          session.post('NodeWorker.sendMessageToWorker', { sessionId, message: JSON.stringify({ id, method, params: args }) });
        });
      // Whether the thread is held at a debugger's pause (Debugger.paused seen, Debugger.resumed not yet).
      let paused = false;
      let resumeSent = false;
      let enabled: Promise<InspectorReply> | null = null;
      session.on('NodeWorker.receivedMessageFromWorker', ({ params: m }) => {
        if (m.sessionId !== sessionId) return;
        const reply = JSON.parse(m.message) as InspectorReply;
        if (reply.id !== undefined) waiting.get(reply.id)?.(reply);
        else if (reply.method === 'Debugger.paused') {
          paused = true;
          // A debugger's pause would hold the hook and the end: let the thread run on, one resume per pause.
          if (!resumeSent) {
            resumeSent = true;
            void send('Debugger.resume');
          }
        } else if (reply.method === 'Debugger.resumed') {
          paused = false;
          resumeSent = false;
        }
      });
      /**
       * Enables the debugger in the thread (slow: every script is reported), once: a thread held at a pause
       * then reports Debugger.paused before the reply, and is resumed above.
       */
      const unpause = (): Promise<InspectorReply> => {
        enabled ??= send('Debugger.enable');
        return enabled;
      };
      void (async () => {
        const ran = send('Runtime.evaluate', { expression: `globalThis[Symbol.for('${ABANDON_HOOK}')]?.() === true` });
        // A thread stopped at a debugger's pause (or with one pending, which the hook would hit) holds the
        // answer: it is unpaused only then.
        const unpausing = setTimeout(() => void unpause(), timeoutMs / 4);
        const answer = await ran;
        clearTimeout(unpausing);
        // Its sockets still open (no hook, or it threw): terminating it would abort the process.
        if (finished || answer.result?.result?.value !== true) return;
        // The hook may have run in the pause loop of a paused thread: it is let run on before it is terminated.
        // terminate() on a thread held in that loop does not end it (V8's termination is only acted on in
        // JavaScript, and the loop waits for the debugger's next message), and resuming it only afterwards
        // let it run on now and then, never ending, its `exit` never coming. Resumed, it ends as a busy one.
        await unpause();
        // Debugger.resumed (above) is looked for rather than awaited: bounded by `timer`.
        while (paused && !finished) await new Promise((r) => setTimeout(r, 10));
        if (finished) return;
        clearTimeout(timer);
        worker.once('exit', () => finish(true));
        void worker.terminate();
        // Paused again in between (a debugger's breakpoint): resumed as it is reported. Never waited on for
        // ever: a thread that still has not ended is left to the caller, as one that would not run the hook.
        setTimeout(() => finish(false), timeoutMs).unref();
      })();
    });
    session.post('NodeWorker.enable', { waitForDebuggerOnStart: false });
  });
}
