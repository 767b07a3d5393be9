/**
 * The operation table, derived from the route definitions (api/route.ts) of every file of
 * `routes/` that the JSON API serves: one {@link RouteSpec} per route, listed here once so a
 * test can compare the table with the server's routes, the served document and docs/api.md
 * (`test/sidecar/ops/openapi.test.ts`). The console, `/metrics` and `/openapi.json` are not
 * operations of the API (`HIDDEN_ROUTES` in openapi.ts).
 */
import type { OperationDoc, RouteSpec } from './route.js';
import { APPROVALS_ROUTES } from '../routes/approvals.js';
import { AUDIT_EXPORT_ROUTES } from '../routes/audit-export.js';
import { AUDIT_ROUTES } from '../routes/audit.js';
import { AUTH_ROUTES } from '../routes/auth.js';
import { AUTHZEN_ROUTES } from '../routes/authzen.js';
import { DECISIONS_ROUTES } from '../routes/decisions.js';
import { DELEGATIONS_ROUTES } from '../routes/delegations.js';
import { HEALTH_ROUTES } from '../routes/health.js';
import { IDEMPOTENCY_ROUTES } from '../routes/idempotency.js';
import { LIMITS_ROUTES } from '../routes/limits.js';
import { ONBOARDING_ROUTES } from '../routes/onboarding.js';
import { PLATFORMS_ROUTES } from '../routes/platforms.js';
import { PROOFS_ROUTES } from '../routes/proofs.js';
import { SUBDELEGATIONS_ROUTES } from '../routes/subdelegations.js';
import { VERIFY_ROUTES } from '../routes/verify.js';
import { WEBHOOKS_ROUTES } from '../routes/webhooks.js';
import { ORGANISATIONS_ROUTES } from '../routes/organisations.js';
import { INVITATIONS_ROUTES } from '../routes/invitations.js';
import { PUBLISHING_ROUTES } from '../routes/publishing.js';
import { CONNECT_ROUTES } from '../routes/connect.js';

/** Every route of the JSON API, by file. */
export const ROUTES: readonly RouteSpec[] = [
  HEALTH_ROUTES, AUTH_ROUTES, ONBOARDING_ROUTES, PLATFORMS_ROUTES, DELEGATIONS_ROUTES, SUBDELEGATIONS_ROUTES,
  PROOFS_ROUTES, VERIFY_ROUTES,
  IDEMPOTENCY_ROUTES,
  APPROVALS_ROUTES, LIMITS_ROUTES, AUDIT_ROUTES, AUDIT_EXPORT_ROUTES, WEBHOOKS_ROUTES, AUTHZEN_ROUTES,
  DECISIONS_ROUTES, ORGANISATIONS_ROUTES, INVITATIONS_ROUTES, PUBLISHING_ROUTES,
  CONNECT_ROUTES,
].flatMap((group) => Object.values(group));

/** The key a route is known by in tests and logs: `METHOD /path` as Fastify registers it. */
export const routeKey = (r: Pick<RouteSpec, 'method' | 'url'>): string => `${r.method} ${r.url}`;

/** Every operation, by {@link routeKey}, derived from {@link ROUTES}. */
export const OPERATIONS: Readonly<Record<string, OperationDoc>> = Object.fromEntries(
  ROUTES.map((r) => [routeKey(r), r.operation]));
