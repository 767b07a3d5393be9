/**
 * Keeping the session alive: sessions last 15 minutes from sign-in or the
 * last refresh (docs/api.md), so the console refreshes two minutes before the
 * expiry it was told, and at least every 13 minutes whatever the clocks say.
 * When the tab wakes up after its timers were held back, it refreshes at once
 * if the time has passed. A refused refresh (`401`) is an expired session.
 */
import { ApiError, api } from './api.js';
import { can, isRole } from '../../src/roles.js';
import type { Permission, Role } from '../../src/roles.js';

/** Where a session acts (docs/organisations.md, "Workspaces"). */
export interface Workspace { workspace_id: string; kind: 'personal' | 'organization'; name: string | null; role: Role }

/** The session read (`GET /v1/auth/session`). */
export interface Session {
  account_id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  account_type: string | null;
  onboarding_step: 'profile' | 'account_type' | 'complete';
  session_expires_at: string;
  /** The workspace the session acts in, with the person's role there. */
  workspace?: Workspace;
}

/**
 * Whether the session's role in its workspace grants `permission` (the API's own table,
 * `ROLE_PERMISSIONS` of src/roles.ts). A session read without a workspace is the person's own
 * workspace, where they are the owner. The console offers only what this allows; the API
 * decides anyway.
 */
export function allows(s: Session, permission: Permission): boolean {
  const role = s.workspace?.role ?? 'owner';
  return isRole(role) && can(role, permission);
}

/** Refresh this long before the expiry. */
export const REFRESH_MARGIN_MS = 2 * 60_000;
/** Never wait longer than this between refreshes (the lifetime is 15 minutes). */
export const MAX_REFRESH_DELAY_MS = 13 * 60_000;
/** Never refresh more often than this. */
export const MIN_REFRESH_DELAY_MS = 5_000;

/** How long to wait before refreshing a session that expires at `expiresAt` (ISO), seen at `now`. */
export function refreshDelay(expiresAt: string, now: number): number {
  const t = Date.parse(expiresAt);
  const d = Number.isFinite(t) ? t - now - REFRESH_MARGIN_MS : MAX_REFRESH_DELAY_MS;
  return Math.min(MAX_REFRESH_DELAY_MS, Math.max(MIN_REFRESH_DELAY_MS, d));
}

/** Schedules refreshes; `onRefreshed` gets each new expiry. */
export class SessionKeeper {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private due = 0;
  private readonly onRefreshed: (expiresAt: string) => void;
  private readonly onWake = (): void => {
    if (document.visibilityState === 'visible' && this.timer !== undefined && Date.now() >= this.due) void this.refresh();
  };

  constructor(onRefreshed: (expiresAt: string) => void) {
    this.onRefreshed = onRefreshed;
    document.addEventListener('visibilitychange', this.onWake);
  }

  /** Plans the next refresh for a session that expires at `expiresAt`. */
  schedule(expiresAt: string): void {
    this.cancel();
    const delay = refreshDelay(expiresAt, Date.now());
    this.due = Date.now() + delay;
    this.timer = setTimeout(() => { void this.refresh(); }, delay);
  }

  /** Stops refreshing (sign-out, expiry). */
  cancel(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Removes the listeners. */
  dispose(): void {
    this.cancel();
    document.removeEventListener('visibilitychange', this.onWake);
  }

  private async refresh(): Promise<void> {
    this.cancel();
    try {
      const r = await api<{ session_expires_at: string }>('POST', '/v1/auth/refresh');
      this.onRefreshed(r.session_expires_at);
      this.schedule(r.session_expires_at);
    } catch (err) {
      // 401: api() has reported the expiry. Anything else (network, 5xx): try again soon.
      if (err instanceof ApiError && err.status === 401) return;
      if (this.timer === undefined) this.timer = setTimeout(() => { void this.refresh(); }, 30_000);
    }
  }
}
