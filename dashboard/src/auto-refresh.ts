/**
 * Runs `refresh` every `everyMs` while the page is visible (issue 36 §6: usage refreshes by itself every
 * 30 s), paused while the tab is hidden and run once at once when it is shown again, so a tab left in the
 * background makes no calls. `stop()` ends it (sign-out, another view).
 *
 * The interval may be shortened for a test by `<html data-refresh-ms>`; the page itself never sets it.
 */
export const REFRESH_MS = 30_000;

export interface AutoRefresh {
  stop(): void;
}

export function refreshEveryMs(): number {
  const asked = Number(document.documentElement.dataset.refreshMs);
  return Number.isFinite(asked) && asked > 0 ? asked : REFRESH_MS;
}

export function startAutoRefresh(refresh: () => void, everyMs: number = refreshEveryMs()): AutoRefresh {
  let timer: ReturnType<typeof setInterval> | null = null;
  const run = (): void => {
    if (timer === null) timer = setInterval(refresh, everyMs);
  };
  const pause = (): void => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
  const onVisibility = (): void => {
    if (document.visibilityState === 'visible') {
      refresh();
      run();
    } else pause();
  };
  document.addEventListener('visibilitychange', onVisibility);
  if (document.visibilityState === 'visible') run();
  return {
    stop() {
      pause();
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
