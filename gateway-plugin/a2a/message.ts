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
 * - The task id the method acts on (`params.id`, `params.taskId`,
 *   `params.message.taskId`, by method), the skill a message declares
 *   (`params.message.metadata.skill`) and the push-notification URL of the
 *   request. The official SDK reads `taskId` and `task_id` alike: a request
 *   with both spellings is refused, so the two can never name different tasks.
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
  /** The task the request reads, cancels, configures or continues. */
  readonly taskId: string | undefined;
  /** The skill a message declares (`params.message.metadata.skill`). */
  readonly skill: string | undefined;
  /** The push-notification URL the request registers. */
  readonly pushUrl: string | undefined;
}

type JsonObject = { [key: string]: JsonValue };

const MAX_ID_LENGTH = 256;
/** Task ids: 1–256 printable characters (the SDK's are UUIDs). */
const TASK_ID_PATTERN = /^[\x21-\x7e]{1,256}$/;

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

function readSend(params: JsonObject, v1: boolean): Pick<A2aMessage, 'taskId' | 'skill' | 'pushUrl'> {
  const message = params.message;
  if (!isObject(message)) return invalid('params.message must be an object.');
  const taskId = taskIdAt(member(message, 'taskId', 'task_id', 'params.message'), 'params.message.taskId', false);
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
  return { taskId, skill, pushUrl: urlAt(push, 'params.configuration push-notification config') };
}

function readParams(spec: A2aMethod, params: JsonObject): Pick<A2aMessage, 'taskId' | 'skill' | 'pushUrl'> {
  const none = { taskId: undefined, skill: undefined, pushUrl: undefined };
  switch (spec.shape) {
    case 'send_v1': return readSend(params, true);
    case 'send_v03': return readSend(params, false);
    case 'task_id': return { ...none, taskId: taskIdAt(params.id, 'params.id', true) };
    case 'push_task_v1':
      return { ...none, taskId: taskIdAt(member(params, 'taskId', 'task_id', 'params'), 'params.taskId', true) };
    case 'push_create_v1':
      return {
        ...none,
        taskId: taskIdAt(member(params, 'taskId', 'task_id', 'params'), 'params.taskId', true),
        pushUrl: urlAt(params, 'params'),
      };
    case 'push_set_v03':
      return {
        ...none,
        taskId: taskIdAt(params.taskId, 'params.taskId', true),
        pushUrl: urlAt(params.pushNotificationConfig, 'params.pushNotificationConfig'),
      };
    default: return none;
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
  return { method, spec, ...readParams(spec, params) };
}

/**
 * The scope an A2A request needs: a message declaring a skill the route maps needs the skill's
 * scope, any other message the route's; other methods their kind's (`a2a.scopes`, default the
 * route's). Refuses a push-notification URL the webhook rules refuse (400 `a2a_push_url_refused`).
 */
export function a2aScope(route: A2aRoute, message: A2aMessage): string {
  if (message.pushUrl !== undefined) {
    const check = validateCallbackUrl(message.pushUrl, route.allowInsecurePushUrls);
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
