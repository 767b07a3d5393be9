/**
 * Reading one A2A JSON-RPC request from a POST body, strictly (docs/a2a.md).
 *
 * - `application/json` (else 415) and strict JSON (duplicate keys refused, so
 *   the gateway and the A2A server read the same method, task id and URL),
 *   else 400 `invalid_request`; a JSON array is 400 `batch_not_supported`.
 * - A request: `jsonrpc: "2.0"`, an id (string of 1–256 characters or a safe
 *   integer), a method A2A defines (v1.0 or v0.3 name, config.ts), else 403
 *   `a2a_method_not_mapped`; `ListTasks` is refused the same way (a list of
 *   every agent's tasks cannot be narrowed to the caller's).
 * - The tasks the method acts on (`params.id`, `params.taskId`,
 *   `params.message.taskId` and the tasks a message references,
 *   `params.message.referenceTaskIds`, whose contents the server hands its
 *   agent), the skill a message declares (`params.message.metadata.skill`)
 *   and the push-notification URLs of the request: the one the method names,
 *   and any `url` under a member whose name contains `push` (so a server
 *   reading another spelling cannot be handed an unchecked URL). The official
 *   SDK reads `taskId` and `task_id` alike: a request with both spellings is
 *   refused, so the two can never name different tasks.
 */

import { ServiceError } from '../../src/errors.js';
import { isJsonMediaType } from '../context.js';
import { JsonNumber, JsonSyntaxError, parseStrictJson } from '../json.js';
import type { JsonValue } from '../json.js';
import type { McpFacts } from '../mcp/message.js';
import { A2A_METHODS } from './config.js';
import type { A2aMethod, A2aRoute } from './config.js';
import { validateCallbackUrl } from '../../src/callback-url.js';

/** One classified A2A request. */
export interface A2aMessage {
  readonly method: string;
  readonly spec: A2aMethod;
  /** The tasks the request reads, cancels, configures, continues or references. */
  readonly taskIds: readonly string[];
  /** The skill a message declares (`params.message.metadata.skill`). */
  readonly skill: string | undefined;
  /** The push-notification URLs the request carries. */
  readonly pushUrls: readonly string[];
}

type JsonObject = { [key: string]: JsonValue };

const MAX_ID_LENGTH = 256;
/** Task ids: 1–256 printable characters (the SDK's are UUIDs). */
const TASK_ID_PATTERN = /^[\x21-\x7e]{1,256}$/;
/** Most tasks one message may reference. */
const MAX_REFERENCES = 64;
/** How deep push URLs are looked for under `params`. */
const MAX_DEPTH = 8;

function invalid(message: string): never {
  throw new ServiceError('invalid_request', message);
}

function isObject(v: JsonValue | undefined): v is JsonObject {
  return v !== null && v !== undefined && typeof v === 'object' && !Array.isArray(v) && !(v instanceof JsonNumber);
}

function readId(value: JsonValue | undefined): string | number {
  if (typeof value === 'string' && value.length >= 1 && value.length <= MAX_ID_LENGTH) return value;
  if (
    value instanceof JsonNumber && /^-?(0|[1-9][0-9]{0,15})$/.test(value.text)
    && Number.isSafeInteger(Number(value.text))
  ) return Number(value.text);
  return invalid('An A2A request needs an id: a string or an integer.');
}

/** `obj[camel]` or `obj[snake]` (the SDK reads both); both present is refused. */
function member(obj: JsonObject, camel: string, snake: string, where: string): JsonValue | undefined {
  if (obj[camel] !== undefined && obj[snake] !== undefined) invalid(`${where}: send ${camel} or ${snake}, not both.`);
  return obj[camel] ?? obj[snake];
}

function taskIdAt(value: JsonValue | undefined, where: string, required: boolean): string | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || !TASK_ID_PATTERN.test(value)) {
    return invalid(`${where} must be a task id (1-256 printable characters).`);
  }
  return value;
}

function urlAt(value: JsonValue | undefined, where: string): string | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) return invalid(`${where} must be an object.`);
  if (typeof value.url !== 'string') return invalid(`${where}.url must be a string.`);
  return value.url;
}

type Read = { taskIds: string[]; skill: string | undefined; pushUrls: string[] };

function referencesOf(message: JsonObject): string[] {
  const refs = member(message, 'referenceTaskIds', 'reference_task_ids', 'params.message');
  if (refs === undefined) return [];
  if (!Array.isArray(refs) || refs.length > MAX_REFERENCES) {
    return invalid(`params.message.referenceTaskIds must be a list of at most ${MAX_REFERENCES} task ids.`);
  }
  return refs.map((r, i) => taskIdAt(r, `params.message.referenceTaskIds[${i}]`, true) as string);
}

function readSend(params: JsonObject, v1: boolean): Read {
  const message = params.message;
  if (!isObject(message)) return invalid('params.message must be an object.');
  const taskId = taskIdAt(member(message, 'taskId', 'task_id', 'params.message'), 'params.message.taskId', false);
  const taskIds = [...(taskId === undefined ? [] : [taskId]), ...referencesOf(message)];
  const metadata = message.metadata;
  let skill: string | undefined;
  if (metadata !== undefined && metadata !== null) {
    if (!isObject(metadata)) invalid('params.message.metadata must be an object.');
    if (metadata.skill !== undefined && typeof metadata.skill !== 'string') {
      invalid('params.message.metadata.skill must be a string.');
    }
    skill = metadata.skill as string | undefined;
  }
  const config = params.configuration;
  if (config !== undefined && !isObject(config)) return invalid('params.configuration must be an object.');
  const push = config === undefined
    ? undefined
    : v1
      ? member(config, 'taskPushNotificationConfig', 'task_push_notification_config', 'params.configuration')
      : config.pushNotificationConfig;
  const url = urlAt(push, 'params.configuration push-notification config');
  return { taskIds, skill, pushUrls: url === undefined ? [] : [url] };
}

function readParams(spec: A2aMethod, params: JsonObject): Read {
  const one = (id: string | undefined, url?: string): Read => ({
    taskIds: id === undefined ? [] : [id], skill: undefined, pushUrls: url === undefined ? [] : [url],
  });
  const taskV1 = (): string | undefined => (
    taskIdAt(member(params, 'taskId', 'task_id', 'params'), 'params.taskId', true)
  );
  switch (spec.shape) {
    case 'send_v1': return readSend(params, true);
    case 'send_v03': return readSend(params, false);
    case 'task_id': return one(taskIdAt(params.id, 'params.id', true));
    case 'push_task_v1': return one(taskV1());
    case 'push_create_v1': return one(taskV1(), urlAt(params, 'params'));
    case 'push_set_v03':
      return one(taskIdAt(params.taskId, 'params.taskId', true),
        urlAt(params.pushNotificationConfig, 'params.pushNotificationConfig'));
    default: return one(undefined);
  }
}

/** Every string `url` under a member whose name contains `push` (any case), down to {@link MAX_DEPTH}. */
function pushUrlsUnder(value: JsonValue, inPush: boolean, depth: number, out: Set<string>): void {
  if (depth > MAX_DEPTH) return;
  if (Array.isArray(value)) {
    for (const v of value) pushUrlsUnder(v, inPush, depth + 1, out);
    return;
  }
  if (!isObject(value)) return;
  for (const [key, v] of Object.entries(value)) {
    if (inPush && key === 'url' && typeof v === 'string') out.add(v);
    pushUrlsUnder(v, inPush || /push/i.test(key), depth + 1, out);
  }
}

/**
 * Parses and classifies the POST body of an A2A route. Records the id and method in `facts`
 * as soon as they are known. Throws a {@link ServiceError}.
 */
export function readA2aMessage(body: Buffer, contentType: string | undefined, facts: McpFacts): A2aMessage {
  if (!isJsonMediaType(contentType)) {
    throw new ServiceError('unsupported_media_type', 'An A2A request must be sent as application/json.');
  }
  let doc: JsonValue;
  try {
    doc = parseStrictJson(body);
  } catch (err) {
    if (err instanceof JsonSyntaxError) invalid('The A2A request is not strict JSON (syntax error or duplicate keys).');
    throw err;
  }
  facts.parsed = true;
  if (Array.isArray(doc)) throw new ServiceError('batch_not_supported');
  if (!isObject(doc)) return invalid('The A2A request must be a JSON-RPC object.');
  facts.id = readId(doc.id);
  if (doc.jsonrpc !== '2.0') invalid('The A2A request must have "jsonrpc": "2.0".');
  const method = doc.method;
  if (typeof method !== 'string' || method.length === 0 || method.length > 256) {
    return invalid('The JSON-RPC method must be a non-empty string.');
  }
  const spec = A2A_METHODS.get(method);
  if (spec === undefined) throw new ServiceError('a2a_method_not_mapped', `${method} is not an A2A method.`);
  facts.method = method;
  if (spec.kind === 'list_tasks') {
    throw new ServiceError('a2a_method_not_mapped',
      'ListTasks is not forwarded: the gateway cannot narrow a list of tasks to the caller\'s own.');
  }
  const params = doc.params ?? (spec.shape === 'none' ? {} : undefined);
  if (!isObject(params)) return invalid('params must be an object.');
  const read = readParams(spec, params);
  const urls = new Set(read.pushUrls);
  pushUrlsUnder(params, false, 0, urls);
  return { method, spec, taskIds: read.taskIds, skill: read.skill, pushUrls: [...urls] };
}

/**
 * The scope an A2A request needs: a message declaring a skill the route maps needs the skill's
 * scope, any other message the route's; other methods their kind's (`a2a.scopes`, default the
 * route's). Refuses a push-notification URL the webhook rules refuse (400 `a2a_push_url_refused`).
 */
export function a2aScope(route: A2aRoute, message: A2aMessage): string {
  for (const url of message.pushUrls) {
    const check = validateCallbackUrl(url, route.allowInsecurePushUrls);
    if (!check.ok) {
      throw new ServiceError('a2a_push_url_refused', `The push-notification URL is refused: ${check.reason}.`);
    }
  }
  const { kind } = message.spec;
  if (kind === 'send') {
    const skill = message.skill === undefined ? undefined : route.skills.get(message.skill);
    return skill ?? route.scopes.send;
  }
  if (kind === 'list_tasks') throw new ServiceError('a2a_method_not_mapped');
  return route.scopes[kind];
}
