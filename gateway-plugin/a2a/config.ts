/**
 * The `a2a` member of a route entry: an Agent2Agent (A2A) server's JSON-RPC
 * endpoint, whose methods (A2A v1.0 and v0.3 names) map to scopes.
 *
 * ```yaml
 * - method: POST
 *   path: /a2a
 *   scope: agent:message             # SendMessage / message/send and the streaming variants
 *   a2a:
 *     skills: { book_flight: travel:book }   # a message declaring this skill needs this scope instead
 *     scopes: { task_read: data:read }       # optional, per kind of method (default: the route's scope)
 *     task_ttl_ms: 86400000                  # how long the gateway remembers who created a task
 *     max_tasks: 100000                      # most tasks remembered per route
 * ```
 *
 * Validated once at registration with path-named `TypeError`s. docs/a2a.md
 * documents the semantics.
 */

import { at, checkBoolean, checkInt, checkObject, checkScope, fail, isPlainObject } from '../validate.js';

/** The kinds of A2A methods; each has one scope. */
export type A2aKind = 'send' | 'task_read' | 'task_cancel' | 'push_config' | 'extended_card' | 'list_tasks';

/** Where a method's task id and push URL are in its `params` (see {@link A2A_METHODS}). */
export type A2aShape =
  | 'send_v1' | 'send_v03' | 'task_id' | 'push_create_v1' | 'push_task_v1' | 'push_set_v03' | 'none';

/** What the gateway knows of one A2A JSON-RPC method. */
export interface A2aMethod {
  readonly kind: A2aKind;
  readonly version: '1.0' | '0.3';
  readonly shape: A2aShape;
}

const v1 = (kind: A2aKind, shape: A2aShape): A2aMethod => ({ kind, version: '1.0', shape });
const v03 = (kind: A2aKind, shape: A2aShape): A2aMethod => ({ kind, version: '0.3', shape });

/**
 * Every A2A JSON-RPC method the gateway recognises: the v1.0 names (specification section 5.3)
 * and the v0.3 names. Any other method is refused (403 `a2a_method_not_mapped`).
 */
export const A2A_METHODS: ReadonlyMap<string, A2aMethod> = new Map([
  ['SendMessage', v1('send', 'send_v1')],
  ['SendStreamingMessage', v1('send', 'send_v1')],
  ['GetTask', v1('task_read', 'task_id')],
  ['SubscribeToTask', v1('task_read', 'task_id')],
  ['CancelTask', v1('task_cancel', 'task_id')],
  ['CreateTaskPushNotificationConfig', v1('push_config', 'push_create_v1')],
  ['GetTaskPushNotificationConfig', v1('push_config', 'push_task_v1')],
  ['ListTaskPushNotificationConfigs', v1('push_config', 'push_task_v1')],
  ['DeleteTaskPushNotificationConfig', v1('push_config', 'push_task_v1')],
  ['GetExtendedAgentCard', v1('extended_card', 'none')],
  ['ListTasks', v1('list_tasks', 'none')],
  ['message/send', v03('send', 'send_v03')],
  ['message/stream', v03('send', 'send_v03')],
  ['tasks/get', v03('task_read', 'task_id')],
  ['tasks/resubscribe', v03('task_read', 'task_id')],
  ['tasks/cancel', v03('task_cancel', 'task_id')],
  ['tasks/pushNotificationConfig/set', v03('push_config', 'push_set_v03')],
  ['tasks/pushNotificationConfig/get', v03('push_config', 'task_id')],
  ['tasks/pushNotificationConfig/list', v03('push_config', 'task_id')],
  ['tasks/pushNotificationConfig/delete', v03('push_config', 'task_id')],
  ['agent/getAuthenticatedExtendedCard', v03('extended_card', 'none')],
]);

/**
 * The `a2a` member of a route entry (docs/a2a.md).
 *
 * @example
 * ```ts
 * const a2a: A2aRouteOptions = { skills: { book_flight: 'travel:book' }, scopes: { task_read: 'data:read' } };
 * const route: RouteEntry = { method: 'POST', path: '/a2a', scope: 'agent:message', a2a };
 * ```
 */
export interface A2aRouteOptions {
  /** Skill id → scope: a message that declares the skill (`message.metadata.skill`) needs that scope. */
  skills?: Record<string, string>;
  /** Scope per kind of method other than sending (default: the route's `scope`). */
  scopes?: { task_read?: string; task_cancel?: string; push_config?: string; extended_card?: string };
  /** How long the gateway remembers which agent created a task, in ms (default {@link DEFAULT_TASK_TTL_MS}). */
  task_ttl_ms?: number;
  /** Most tasks remembered per route (default {@link DEFAULT_MAX_TASKS}); the oldest are forgotten first. */
  max_tasks?: number;
  /** Largest POSTed message in bytes (default: the gateway's `bodyLimit`). */
  body_limit_bytes?: number;
  /** An SSE answer (streaming methods) silent this long is ended (default 300000). */
  stream_idle_timeout_ms?: number;
  /**
   * Push-notification URLs may be `http` and name non-public hosts (development and tests only;
   * the webhook rule `SIDECAR_WEBHOOK_ALLOW_INSECURE` in the gateway). Default `false`.
   */
  allow_insecure_push_urls?: boolean;
}

/** A compiled `a2a` member. */
export interface A2aRoute {
  readonly skills: ReadonlyMap<string, string>;
  /** Scope per kind (`send` is the route's scope). */
  readonly scopes: Readonly<Record<Exclude<A2aKind, 'list_tasks'>, string>>;
  readonly taskTtlMs: number;
  readonly maxTasks: number;
  readonly bodyLimit: number | undefined;
  readonly streamIdleMs: number;
  readonly allowInsecurePushUrls: boolean;
}

/** Default `task_ttl_ms`: 24 hours. */
export const DEFAULT_TASK_TTL_MS = 86_400_000;
/** Default `max_tasks`: 100 000 per route. */
export const DEFAULT_MAX_TASKS = 100_000;
/** Skill ids in the config: 1–128 characters of `A-Z a-z 0-9 _ - . : /`. */
export const SKILL_ID_PATTERN = /^[A-Za-z0-9_.:/-]{1,128}$/;

/** Validates and compiles the `a2a` member of a route with scope `scope`. Throws a path-named `TypeError`. */
export function compileA2a(value: unknown, path: string, scope: string): A2aRoute {
  const a2a = checkObject(value, path, [
    'skills', 'scopes', 'task_ttl_ms', 'max_tasks', 'body_limit_bytes', 'stream_idle_timeout_ms',
    'allow_insecure_push_urls',
  ]);
  const skills = new Map<string, string>();
  if (a2a.skills !== undefined) {
    if (!isPlainObject(a2a.skills)) fail(at(path, 'skills'), 'must map skill ids to scopes');
    for (const [id, s] of Object.entries(a2a.skills)) {
      if (!SKILL_ID_PATTERN.test(id)) {
        fail(at(at(path, 'skills'), id), 'is not a skill id (1-128 of A-Z a-z 0-9 _ - . : /)');
      }
      skills.set(id, checkScope(s, at(at(path, 'skills'), id)));
    }
  }
  const scopes = a2a.scopes === undefined
    ? {}
    : checkObject(a2a.scopes, at(path, 'scopes'), ['task_read', 'task_cancel', 'push_config', 'extended_card']);
  const scopeOf = (kind: string): string => (
    scopes[kind] === undefined ? scope : checkScope(scopes[kind], at(at(path, 'scopes'), kind))
  );
  return {
    skills,
    scopes: {
      send: scope,
      task_read: scopeOf('task_read'),
      task_cancel: scopeOf('task_cancel'),
      push_config: scopeOf('push_config'),
      extended_card: scopeOf('extended_card'),
    },
    taskTtlMs: checkInt(a2a.task_ttl_ms, at(path, 'task_ttl_ms'), 1_000, 2_592_000_000, DEFAULT_TASK_TTL_MS),
    maxTasks: checkInt(a2a.max_tasks, at(path, 'max_tasks'), 1, 10_000_000, DEFAULT_MAX_TASKS),
    bodyLimit: a2a.body_limit_bytes === undefined
      ? undefined
      : checkInt(a2a.body_limit_bytes, at(path, 'body_limit_bytes'), 0, 1_073_741_824, 0),
    streamIdleMs: checkInt(a2a.stream_idle_timeout_ms, at(path, 'stream_idle_timeout_ms'), 1, 86_400_000, 300_000),
    allowInsecurePushUrls: checkBoolean(a2a.allow_insecure_push_urls, at(path, 'allow_insecure_push_urls'), false),
  };
}

/** Every scope an A2A route can require, with where it comes from (shadow-mode checks). */
export function a2aScopes(a2a: A2aRoute): [where: string, scope: string][] {
  const out: [string, string][] = Object.entries(a2a.scopes).map(([kind, s]) => [`a2a ${kind} scope`, s]);
  for (const [id, s] of a2a.skills) out.push([`skill ${id}'s scope`, s]);
  return out;
}
