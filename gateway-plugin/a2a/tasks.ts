/**
 * Task ownership on an A2A route (docs/a2a.md#tasks): which agent created
 * each task, so that reading, subscribing to, cancelling, configuring or
 * continuing a task is allowed only to that agent.
 *
 * - {@link TaskOwners}: task id → agent id, in the memory of one gateway
 *   process, per route; bounded (`max_tasks`, the least recently recorded
 *   forgotten first) and TTL'd (`task_ttl_ms` after the last answer that
 *   named the task). A task the gateway does not remember is refused to
 *   everyone (404 `a2a_task_not_found`): fail closed after a restart, on
 *   another replica, or after eviction.
 * - {@link recordTasks}: a transform on the upstream's answer to a message
 *   (JSON, or an SSE stream of JSON-RPC responses) that records every task id
 *   it names for the agent the message was allowed for, BEFORE the bytes
 *   naming it reach the client (a JSON answer's last chunk is held until the
 *   whole answer was read; an SSE event is released once it is complete).
 *   The first agent to be answered with a task id owns it; a later answer
 *   naming it for another agent does not change the owner.
 */

import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';

/** Largest JSON answer (or single SSE event) read for task ids; beyond it the answer passes unread. */
export const MAX_TASK_ANSWER_BYTES = 16 * 1024 * 1024;

/** Task id → owning agent, bounded and TTL'd (see the file header). */
export class TaskOwners {
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;
  readonly #owners = new Map<string, { agentId: string; expiresAt: number }>();

  constructor(ttlMs: number, max: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#max = max;
    this.#now = now;
  }

  /** The agent that owns `taskId`, or `undefined` (unknown or expired). */
  owner(taskId: string): string | undefined {
    const entry = this.#owners.get(taskId);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#owners.delete(taskId);
      return undefined;
    }
    return entry.agentId;
  }

  /** Records (or refreshes) `agentId` as the owner of `taskId`; a task owned by another agent keeps its owner. */
  record(taskId: string, agentId: string): void {
    const current = this.owner(taskId);
    if (current !== undefined && current !== agentId) return;
    this.#owners.delete(taskId);
    this.#owners.set(taskId, { agentId, expiresAt: this.#now() + this.#ttlMs });
    while (this.#owners.size > this.#max) this.#owners.delete(this.#owners.keys().next().value as string);
  }

  /** How many tasks are remembered (expired ones included until looked up or evicted). */
  get size(): number {
    return this.#owners.size;
  }
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/**
 * The task ids a JSON-RPC response to a message names: v1.0 `{task}`, `{message}`, `{statusUpdate}`,
 * `{artifactUpdate}` results, and v0.3 results (`kind: task` with `id`, others with `taskId`).
 */
export function taskIdsOf(response: unknown): string[] {
  if (!isObj(response) || !isObj(response.result)) return [];
  const r = response.result;
  const ids = [
    r.kind === 'task' ? str(r.id) : str(r.taskId),
    isObj(r.task) ? str(r.task.id) : undefined,
    isObj(r.message) ? str(r.message.taskId) : undefined,
    isObj(r.statusUpdate) ? str(r.statusUpdate.taskId) : undefined,
    isObj(r.artifactUpdate) ? str(r.artifactUpdate.taskId) : undefined,
  ];
  return ids.filter((id): id is string => id !== undefined);
}

function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** The `data:` payload of one SSE event (lines joined with `\n`). */
function eventData(event: string): string {
  return event.split(/\r\n|\r|\n/).filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n');
}

/** The transform of the file header: `record` is called with every task id the answer names. */
export function recordTasks(sse: boolean, record: (taskId: string) => void): Transform {
  const seen = (doc: unknown): void => {
    for (const id of taskIdsOf(doc)) record(id);
  };
  if (!sse) {
    const chunks: Buffer[] = [];
    let size = 0;
    let held: Buffer | undefined;
    return new Transform({
      transform(chunk: Buffer, _enc, done: TransformCallback): void {
        size += chunk.length;
        if (size <= MAX_TASK_ANSWER_BYTES) chunks.push(chunk);
        if (held !== undefined) this.push(held);
        held = chunk;
        done();
      },
      flush(done: TransformCallback): void {
        if (size <= MAX_TASK_ANSWER_BYTES) seen(parseOrNull(Buffer.concat(chunks).toString('utf8')));
        if (held !== undefined) this.push(held);
        done();
      },
    });
  }
  let pending = '';
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback): void {
      pending += chunk.toString('latin1');
      const events = pending.split(/\r\n\r\n|\n\n|\r\r/);
      const rest = events.pop() ?? '';
      const complete = pending.slice(0, pending.length - rest.length);
      for (const event of events) seen(parseOrNull(Buffer.from(eventData(event), 'latin1').toString('utf8')));
      // An event too large to read passes unread (its task, if any, is then unknown: refused later).
      const tooLarge = rest.length > MAX_TASK_ANSWER_BYTES;
      const out = tooLarge ? complete + rest : complete;
      pending = tooLarge ? '' : rest;
      if (out.length > 0) this.push(Buffer.from(out, 'latin1'));
      done();
    },
    flush(done: TransformCallback): void {
      if (pending.length > 0) {
        seen(parseOrNull(Buffer.from(eventData(pending), 'latin1').toString('utf8')));
        this.push(Buffer.from(pending, 'latin1'));
      }
      done();
    },
  });
}
