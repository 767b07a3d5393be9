/**
 * The reverse proxy's side of A2A task ownership (a2a/tasks.ts): each A2A
 * route keeps its own task owners ({@link taskOwnersByRoute}), and the
 * answer to an allowed A2A send is read as it passes for the tasks it
 * names, recorded as the verified agent's ({@link a2aAnswer}).
 */

import { pipeline as pipeStreams } from 'node:stream';
import type { Readable } from 'node:stream';
import type { RouteMatch } from '../routes.js';
import type { Admission, GatewayVerdict } from '../verdict.js';
import { A2A_METHODS } from './config.js';
import { TaskOwners, recordTasks } from './tasks.js';

/** The task owners of each A2A route, made on first use (`undefined` for other routes). */
export function taskOwnersByRoute(): (route: RouteMatch) => TaskOwners | undefined {
  const byRoute = new Map<number, TaskOwners>();
  return (route) => {
    if (route.a2a === undefined) return undefined;
    let owners = byRoute.get(route.index);
    if (owners === undefined) {
      owners = new TaskOwners(route.a2a.taskTtlMs, route.a2a.maxTasks);
      byRoute.set(route.index, owners);
    }
    return owners;
  };
}

/** The answer to an allowed A2A message, read for the task ids it names as it passes (a2a/tasks.ts). */
export function a2aAnswer(
  tasksFor: (route: RouteMatch) => TaskOwners | undefined,
  admission: Admission | undefined, decision: GatewayVerdict | undefined, sse: boolean, body: Readable,
): Readable {
  const method = admission?.mcp?.method;
  const owners = admission === undefined ? undefined : tasksFor(admission.route);
  if (owners === undefined || method === undefined || A2A_METHODS.get(method)?.kind !== 'send') return body;
  const agentId = decision?.kind === 'allow' ? decision.agentId : undefined;
  if (agentId === undefined) return body;
  const tap = recordTasks(sse, (taskId) => owners.record(taskId, agentId));
  return pipeStreams(body, tap, () => undefined);
}
