/**
 * The console's shell: reads the session, keeps it alive (session.ts), sends
 * the reader to sign-in when there is none or it has expired (remembering the
 * page, which sign-in returns to), to onboarding until it is complete, and
 * otherwise shows the page of the route inside the layout (skip link, header,
 * navigation, main). A render failure shows a message, never a blank page.
 */
import type { ComponentType, JSX } from 'preact';
import { createContext } from 'preact';
import { useContext, useEffect, useErrorBoundary, useMemo, useState } from 'preact/hooks';
import { ApiError, api, onSessionExpired } from './api.js';
import type { Session } from './session.js';
import { SessionKeeper, allows } from './session.js';
import type { Permission } from '../../src/roles.js';
import { Link, currentTarget, navigate, safeTarget, useRoute } from './router.js';
import type { Route } from './router.js';
import { ErrorText } from './ui/common.js';
import { SignInPage } from './pages/sign-in.js';
import { OnboardingPage } from './pages/onboarding.js';
import { OverviewPage } from './pages/overview.js';
import { PlatformPage } from './pages/platform.js';
import { AgentsPage } from './pages/agents.js';
import { RequestsPage, RequestPage } from './pages/requests.js';
import { CertificatesPage } from './pages/certificates.js';
import { CertificatePage } from './pages/certificate.js';
import { ApprovalsPage } from './pages/approvals.js';
import { AuditPage } from './pages/audit.js';
import { UsagePage } from './pages/usage.js';
import { WebhooksPage } from './pages/webhooks.js';
import { MembersPage } from './pages/members.js';
import { OrganisationsPage } from './pages/organisations.js';
import { DirectoryPage } from './pages/directory.js';
import { ConnectionsPage } from './pages/connections.js';
import { WorkspaceSwitcher } from './ui/workspace.js';

/** What every page can reach: the session and how to re-read it. */
export interface AppState {
  session: Session; reloadSession: () => Promise<Session | null>;
  /** The person's workspaces may have changed (an invitation accepted): the switcher reads them again. */
  workspacesChanged: () => void;
  /** The API ended the session (leaving an organisation): back to sign-in, saying `notice`. */
  sessionEnded: (notice: string) => void;
}
/** The app state context (set inside the layout, for signed-in pages). */
export const AppContext = createContext<AppState | null>(null);
/** The app state; only under a signed-in page. */
export function useApp(): AppState {
  const v = useContext(AppContext);
  if (!v) throw new TypeError('useApp() outside a signed-in page');
  return v;
}

/** A page of the navigation. */
interface NavItem {
  href: string; label: string; match: (path: string) => boolean; page: ComponentType<{ route: Route }>;
  /** Shown only when the session's role has this permission (src/roles.ts). */
  needs?: Permission;
}
const NAV: NavItem[] = [
  { href: '/', label: 'Overview', match: (p) => p === '/', page: OverviewPage },
  { href: '/requests', label: 'Requests', match: (p) => p === '/requests', page: RequestsPage },
  { href: '/approvals', label: 'Approvals', match: (p) => p === '/approvals', page: ApprovalsPage },
  { href: '/certificates', label: 'Certificates', match: (p) => p === '/certificates', page: CertificatesPage },
  { href: '/agents', label: 'Agents', match: (p) => p === '/agents', page: AgentsPage },
  { href: '/platform', label: 'Platform', match: (p) => p === '/platform', page: PlatformPage },
  { href: '/connections', label: 'Connections', match: (p) => p === '/connections', page: ConnectionsPage },
  { href: '/directory', label: 'Directory', match: (p) => p === '/directory', page: DirectoryPage },
  { href: '/audit', label: 'Audit', match: (p) => p === '/audit', page: AuditPage, needs: 'audit_read' },
  { href: '/usage', label: 'Usage', match: (p) => p === '/usage', page: UsagePage, needs: 'audit_read' },
  { href: '/webhooks', label: 'Webhooks', match: (p) => p === '/webhooks', page: WebhooksPage, needs: 'audit_read' },
  { href: '/members', label: 'Members', match: (p) => p === '/members', page: MembersPage },
  { href: '/organisations', label: 'Organisations', match: (p) => p === '/organisations', page: OrganisationsPage },
];

function pageFor(route: Route): { page: ComponentType<{ route: Route }>; nav: string | null } {
  if (/^\/requests\/[^/]+$/.test(route.path)) return { page: RequestPage, nav: '/requests' };
  if (/^\/certificates\/[^/]+$/.test(route.path)) return { page: CertificatePage, nav: '/certificates' };
  const item = NAV.find((n) => n.match(route.path));
  return item ? { page: item.page, nav: item.href } : { page: NotFound, nav: null };
}

function NotFound(): JSX.Element {
  return <section><h1>Page not found</h1><p>There is no such page in the console. <Link href="/">Go to the overview</Link>.</p></section>;
}

function Guard(p: { children: JSX.Element }): JSX.Element {
  const [error, reset] = useErrorBoundary();
  if (error) {
    return (
      <div class="panel">
        <ErrorText error="This page failed to render. Your data is safe; reload the page or go back." />
        <button type="button" onClick={reset}>Try again</button>
      </div>
    );
  }
  return p.children;
}

/** The console application. */
export function App(): JSX.Element {
  const route = useRoute();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [notice, setNotice] = useState<string | null>(null);
  const [fatal, setFatal] = useState<unknown>(null);
  const [workspaces, setWorkspaces] = useState(0);
  const keeper = useMemo(() => new SessionKeeper((exp) => setSession((s) => (s ? { ...s, session_expires_at: exp } : s))), []);

  const reloadSession = async (): Promise<Session | null> => {
    try {
      const s = await api<Session>('GET', '/v1/auth/session', undefined, { anonymous: true });
      setSession(s);
      setFatal(null);
      keeper.schedule(s.session_expires_at);
      return s;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) { keeper.cancel(); setSession(null); return null; }
      setFatal(err);
      throw err;
    }
  };

  useEffect(() => {
    onSessionExpired(() => {
      keeper.cancel();
      setSession(null);
      if (currentTarget().startsWith('/sign-in')) return;
      setNotice('Your session has expired. Sign in again to return to the page you were on.');
      navigate(`/sign-in?next=${encodeURIComponent(currentTarget())}`, { replace: true });
    });
    reloadSession().catch(() => undefined);
    return () => { onSessionExpired(null); keeper.dispose(); };
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    if (session === null && route.path !== '/sign-in') navigate(`/sign-in?next=${encodeURIComponent(currentTarget())}`, { replace: true });
    if (session && route.path === '/sign-in') navigate(safeTarget(route.query.get('next')), { replace: true });
  }, [session, route.path]); // eslint-disable-line react-hooks/exhaustive-deps

  const signOut = async (): Promise<void> => {
    try { await api('POST', '/v1/auth/logout'); } catch { /* the session is gone either way */ }
    keeper.cancel();
    setNotice('You are signed out.');
    setSession(null);
    navigate('/sign-in', { replace: true });
  };

  if (session === undefined) {
    return <main id="main" class="center">{fatal ? <ErrorText error={fatal} /> : <p role="status">Loading the console…</p>}</main>;
  }
  if (session === null || route.path === '/sign-in') {
    return (
      <main id="main" class="center">
        <SignInPage notice={notice} next={safeTarget(route.query.get('next'))}
          onSignedIn={async () => { setNotice(null); await reloadSession(); }} />
      </main>
    );
  }
  const workspacesChanged = (): void => setWorkspaces((n) => n + 1);
  const sessionEnded = (text: string): void => {
    keeper.cancel();
    setNotice(text);
    setSession(null);
    navigate('/sign-in', { replace: true });
  };
  const state: AppState = { session, reloadSession, workspacesChanged, sessionEnded };
  const onboarding = session.onboarding_step !== 'complete';
  const { page: Page, nav } = onboarding ? { page: OnboardingPage, nav: null } : pageFor(route);
  return (
    <AppContext.Provider value={state}>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <span class="brand">agent-authz</span>
        {!onboarding && <WorkspaceSwitcher session={session} version={workspaces} reload={reloadSession} />}
        <span class="who">Signed in as <strong>{session.email}</strong></span>
        <button type="button" onClick={() => { void signOut(); }}>Sign out</button>
      </header>
      {!onboarding && (
        <nav aria-label="Console">
          <ul>
            {NAV.filter((n) => !n.needs || allows(session, n.needs)).map((n) => (
              <li key={n.href}><Link href={n.href} aria-current={nav === n.href ? 'page' : undefined}>{n.label}</Link></li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main">
        <Guard><Page key={route.path} route={route} /></Guard>
      </main>
    </AppContext.Provider>
  );
}
