/**
 * A small client-side router for the console under `/console/`: the path is
 * the state (so reloading or sharing a link opens the same page), links are
 * real `<a href>`s that work with the keyboard and open in a new tab, and
 * `navigate` moves with the History API. The sidecar answers every client
 * route with the app (routes/console.ts).
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** The console's base path. */
export const BASE = '/console';

/** The current route: the path inside the console (`/requests/abc`) and the query. */
export interface Route { path: string; query: URLSearchParams }

const listeners = new Set<() => void>();

/** The route of the current location. */
export function currentRoute(): Route {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return { path: p === '' ? '/' : p, query: new URLSearchParams(location.search) };
}

/** The current in-console path with its query (what sign-in returns to). */
export function currentTarget(): string {
  const r = currentRoute();
  return r.path + (r.query.size ? `?${r.query}` : '');
}

/** A safe return target: an in-console path only (never another origin or `//host`). */
export function safeTarget(raw: string | null | undefined): string {
  if (!raw || !raw.startsWith('/') || raw.startsWith('//') || raw.includes('\\') || raw.startsWith('/sign-in')) return '/';
  return raw;
}

/** Goes to an in-console path (`/audit?agent_id=...`). */
export function navigate(to: string, o: { replace?: boolean } = {}): void {
  const url = BASE + (to.startsWith('/') ? to : `/${to}`);
  if (url === location.pathname + location.search) return;
  if (o.replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  for (const l of listeners) l();
}

/** The current route, re-rendered on navigation. */
export function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const update = (): void => setRoute(currentRoute());
    listeners.add(update);
    addEventListener('popstate', update);
    return () => { listeners.delete(update); removeEventListener('popstate', update); };
  }, []);
  return route;
}

/** An in-console link: a real anchor; a plain click navigates without a reload. */
export function Link(p: { href: string; children: ComponentChildren; class?: string; title?: string; 'aria-current'?: 'page' | undefined }): JSX.Element {
  const { href, children, ...rest } = p;
  const onClick = (e: MouseEvent): void => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return <a href={BASE + href} onClick={onClick} {...rest}>{children}</a>;
}
