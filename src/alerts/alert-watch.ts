/**
 * The sender of owners' alerts (issue 36 §3). It runs on the thread that owns the ledger (a gateway alone, or
 * the main thread of workers: never a worker, whose management API only registers webhooks), and every
 * `webhooks.check_interval_s` reads what the alerts watch: each owner's balance and its usage rows of the
 * current and last minute. An alert is sent by whoever claims it in the store first (webhook-store.ts), so a
 * fleet's instances, which each run a sender, send each alert once. At its start and with each check it also
 * resumes the deliveries another sender left pending when it stopped or crashed (delivery-resume.ts).
 *
 * - `balance_low`: the balance is below `balance_below_ru`; sent once, then again only after it has been
 *   at or above the threshold (a top-up re-arms it).
 * - `key_refused`: an endpoint's calls refused (HTTP 4xx: its restrictions, its rates, its balance) more than
 *   `refused_per_minute` times in one minute: a leaked or broken key. At most one delivery a minute.
 * - `error_rate`: of the owner's calls in one minute (at least ERROR_RATE_MIN_CALLS), the share that failed or
 *   were refused is above `error_rate_above`. At most one delivery a minute.
 */
import { randomUUID } from 'node:crypto';
import type { MinuteCount, WebhookEvent, WebhookRecord, WebhookStore } from '../accounts/webhook-store.js';
import { isoTime } from '../api-answers.js';
import { type DeliveryOptions, type DeliveryTarget, deliver, leaseUntilS } from './delivery.js';
import { resumeStalled } from './delivery-resume.js';

/** The fewest calls in a minute for its error rate to be judged: one failed call of two is not an alert. */
export const ERROR_RATE_MIN_CALLS = 10;

export interface AlertWatchDeps {
  store: WebhookStore;
  /** The owner's live balance, as the management API shows it. */
  balance: (ownerId: number) => number | Promise<number>;
  /** The `webhooks` section in force. */
  settings: () => { allow_private: boolean; timeout_ms: number; retry_for_s: number; check_interval_s: number };
  /** Told of a check that failed (the store unreachable): the next check tries again. */
  onError: (err: Error) => void;
  now?: () => number;
  /** One attempt of a delivery; default a real POST (delivery.ts). */
  post?: DeliveryOptions['post'];
}

export interface AlertWatch {
  /** One check now (the timer's; the tests call it). */
  check(): Promise<void>;
  /** Stops the timer and the retries; resolves when the deliveries under way have ended. */
  close(): Promise<void>;
}

/** An alert to send: its event and what it says. */
interface Alert {
  event: WebhookEvent;
  data: Record<string, unknown>;
}

/** Per minute, per endpoint: calls refused (HTTP 4xx). */
function refusalsByMinute(rows: readonly MinuteCount[]): Map<number, Map<string, number>> {
  const out = new Map<number, Map<string, number>>();
  for (const r of rows) {
    if (r.status < 400 || r.status > 499) continue;
    const m = out.get(r.t) ?? new Map<string, number>();
    m.set(r.endpointId, (m.get(r.endpointId) ?? 0) + r.requests);
    out.set(r.t, m);
  }
  return out;
}

/** Per minute: the owner's calls and those that were not a success. */
function errorsByMinute(rows: readonly MinuteCount[]): Map<number, { requests: number; errors: number }> {
  const out = new Map<number, { requests: number; errors: number }>();
  for (const r of rows) {
    const m = out.get(r.t) ?? { requests: 0, errors: 0 };
    m.requests += r.requests;
    if (r.status !== 0) m.errors += r.requests;
    out.set(r.t, m);
  }
  return out;
}

/** What the alerts of one owner's webhooks read this check: its balance and its last minutes' usage, once for all. */
interface OwnerMinutes {
  balance: number | null;
  /** The minutes of the usage rows, oldest first. */
  minutes: number[];
  refusals: Map<number, Map<string, number>>;
  errors: Map<number, { requests: number; errors: number }>;
}

function ownerMinutes(balance: number | null, rows: readonly MinuteCount[]): OwnerMinutes {
  const minutes = [...new Set(rows.map((r) => r.t))].sort((a, b) => a - b);
  return { balance, minutes, refusals: refusalsByMinute(rows), errors: errorsByMinute(rows) };
}

/** The alerts of one webhook this check, each claimed in the store (so sent by this sender only). */
async function alertsOf(store: WebhookStore, hook: WebhookRecord, owner: OwnerMinutes): Promise<Alert[]> {
  const { balance, minutes } = owner;
  const alerts: Alert[] = [];
  if (hook.events.includes('balance_low') && hook.balanceBelowRu !== null && balance !== null) {
    const low = balance < hook.balanceBelowRu;
    if (low !== hook.balanceLow && (await store.setBalanceLow(hook.id, low)) && low) {
      alerts.push({ event: 'balance_low', data: { balance_ru: balance, balance_below_ru: hook.balanceBelowRu } });
    }
  }
  if (hook.events.includes('key_refused') && hook.refusedPerMinute !== null) {
    for (const t of minutes) {
      const over = [...(owner.refusals.get(t) ?? [])].filter(([, n]) => n > hook.refusedPerMinute!);
      if (over.length === 0 || !(await store.claimMinute(hook.id, 'key_refused', t))) continue;
      const endpoints = over.map(([endpoint_id, refused]) => ({ endpoint_id, refused }));
      alerts.push({ event: 'key_refused', data: { minute: isoTime(t), refused_per_minute: hook.refusedPerMinute, endpoints } });
    }
  }
  if (hook.events.includes('error_rate') && hook.errorRateAbove !== null) {
    for (const t of minutes) {
      const m = owner.errors.get(t)!;
      const rate = m.requests === 0 ? 0 : m.errors / m.requests;
      if (m.requests < ERROR_RATE_MIN_CALLS || rate <= hook.errorRateAbove) continue;
      if (!(await store.claimMinute(hook.id, 'error_rate', t))) continue;
      alerts.push({
        event: 'error_rate',
        data: { minute: isoTime(t), requests: m.requests, errors: m.errors, error_rate: rate, error_rate_above: hook.errorRateAbove },
      });
    }
  }
  return alerts;
}

export function startAlertWatch(deps: AlertWatchDeps): AlertWatch {
  const now = deps.now ?? Date.now;
  const underway = new Set<Promise<unknown>>();
  const waits = new Set<{ timer: NodeJS.Timeout; done: () => void }>();
  // This sender's id in the store's claims on deliveries (random: a restart is another sender).
  const by = randomUUID();
  let closed = false;
  let checking: Promise<void> | null = null;

  // After the stop, a wait ends at once (a delivery resumed just then is let go again, not held).
  const wait = (ms: number): Promise<void> =>
    new Promise((done) => {
      if (closed) {
        done();
        return;
      }
      const w = {
        timer: setTimeout(() => {
          waits.delete(w);
          done();
        }, ms),
        done,
      };
      waits.add(w);
    });

  const options = (): DeliveryOptions => {
    const s = deps.settings();
    return {
      allowPrivate: s.allow_private,
      timeoutMs: s.timeout_ms,
      retryForS: s.retry_for_s,
      now,
      ...(deps.post !== undefined ? { post: deps.post } : {}),
    };
  };

  function start(target: DeliveryTarget): void {
    const p = deliver(deps.store, target, by, options(), () => closed, wait)
      .catch((err: unknown) => deps.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => underway.delete(p));
    underway.add(p);
  }

  async function send(hook: WebhookRecord, alert: Alert): Promise<void> {
    const startedMs = now();
    const at = Math.floor(startedMs / 1000);
    const bodyOf = (id: number): string =>
      JSON.stringify({ id, webhook_id: hook.id, owner_id: hook.ownerId, event: alert.event, time: isoTime(at), data: alert.data });
    const claim = { by, until: leaseUntilS(startedMs, 0, deps.settings().timeout_ms) };
    const id = await deps.store.addDelivery(hook.id, alert.event, at, claim, bodyOf);
    start({ id, url: hook.url, secret: hook.secret, event: alert.event, body: bodyOf(id), startedMs, attempts: 0, dueMs: startedMs });
  }

  // The deliveries other senders left (stopped or crashed): looked for at the start and with each check.
  let resuming: Promise<void> | null = null;
  const resume = (): Promise<void> => {
    resuming ??= resumeStalled({ store: deps.store, by, now, settings: deps.settings, closed: () => closed, start })
      .catch((err: unknown) => deps.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        resuming = null;
      });
    return resuming;
  };

  async function checkAll(): Promise<void> {
    await resume();
    const hooks = await deps.store.watched();
    const minute = Math.floor(now() / 60_000) * 60;
    const byOwner = new Map<number, WebhookRecord[]>();
    for (const h of hooks) {
      const mine = byOwner.get(h.ownerId);
      if (mine === undefined) byOwner.set(h.ownerId, [h]);
      else mine.push(h);
    }
    for (const [ownerId, mine] of byOwner) {
      const balance = mine.some((h) => h.events.includes('balance_low')) ? await deps.balance(ownerId) : null;
      const rows = mine.some((h) => h.events.includes('key_refused') || h.events.includes('error_rate'))
        ? await deps.store.minuteCounts(ownerId, minute - 60)
        : [];
      const owner = ownerMinutes(balance, rows);
      for (const hook of mine) {
        for (const alert of await alertsOf(deps.store, hook, owner)) if (!closed) await send(hook, alert);
      }
    }
  }

  const check = (): Promise<void> => {
    // A check still under way (a slow store) is not doubled: the next tick comes soon enough.
    checking ??= checkAll()
      .catch((err: unknown) => deps.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        checking = null;
      });
    return checking;
  };
  const timer = setInterval(() => void check(), deps.settings().check_interval_s * 1000);
  timer.unref();
  void resume();

  return {
    check,
    async close() {
      closed = true;
      clearInterval(timer);
      for (const w of waits) {
        clearTimeout(w.timer);
        w.done();
      }
      waits.clear();
      await checking;
      await resuming;
      await Promise.all([...underway]);
    },
  };
}
