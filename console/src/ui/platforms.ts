/**
 * Who is behind a connection: the console joins the workspace's own platforms
 * (`GET /v1/service/platforms`) and the directory of published platforms
 * (`GET /v1/service/directory`, with each publisher's verified domain) by
 * `platform_id`. A connection to a platform that is no longer published is
 * known by its id only: the API shows a platform's publisher through the
 * directory alone.
 */
import { api } from '../api.js';
import type { Connection, DirectoryEntry, Platform } from '../types.js';

/** What the console knows of a platform. */
export interface PlatformInfo {
  platform_id: string;
  /** Its name, when it is the workspace's own or in the directory. */
  name: string | null;
  /** The workspace's own platform (its first connection). */
  own: boolean;
  /** The publisher and its verified domain, for a platform in the directory. */
  publisher: DirectoryEntry['publisher'] | null;
}

/** The platforms known to the workspace, by id. */
export async function loadPlatformInfo(): Promise<Map<string, PlatformInfo>> {
  const [own, dir] = await Promise.all([
    api<{ platforms: Platform[] }>('GET', '/v1/service/platforms'),
    api<{ platforms: DirectoryEntry[] }>('GET', '/v1/service/directory'),
  ]);
  const m = new Map<string, PlatformInfo>();
  for (const e of dir.platforms) {
    m.set(e.platform_id, { platform_id: e.platform_id, name: e.name, own: false, publisher: e.publisher });
  }
  for (const p of own.platforms) {
    const publisher = m.get(p.platform_id)?.publisher ?? null;
    m.set(p.platform_id, { platform_id: p.platform_id, name: p.name, own: true, publisher });
  }
  return m;
}

/** The info of `c`'s platform (a placeholder for one the workspace cannot see). */
export function platformOf(m: Map<string, PlatformInfo>, c: Pick<Connection, 'platform_id'>): PlatformInfo {
  return m.get(c.platform_id) ?? { platform_id: c.platform_id, name: null, own: false, publisher: null };
}

/** "Trip Planner, published by Travel Co (verified travel.example.org)", or what is known. */
export function publisherText(i: PlatformInfo): string {
  if (i.publisher) return `published by ${i.publisher.name} (verified domain ${i.publisher.verified_domain})`;
  return i.own ? 'your own platform' : 'not in the directory now (unpublished): its publisher cannot be shown';
}
