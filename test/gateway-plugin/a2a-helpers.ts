/**
 * A real A2A server for the gateway's A2A tests, built with the official SDK
 * (`@a2a-js/sdk` 1.3: `DefaultRequestHandler` with an in-memory task store
 * and push-notification store, behind `JsonRpcTransportHandler` for the v1.0
 * method names and `LegacyJsonRpcTransportHandler` for the v0.3 names), on
 * node:http on 127.0.0.1 (express is not installed; this does what the SDK's
 * express `jsonRpcHandler` does: a JSON answer, or an SSE stream of JSON-RPC
 * responses for the streaming methods).
 *
 * The agent answers every message with a task in state input-required (so
 * it can be read, continued, subscribed to and cancelled). Every POST the
 * server receives is recorded (`received`), so tests prove that a refused
 * call never reached it.
 */

import type { IncomingHttpHeaders } from 'node:http';
import { AgentCard, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent, DefaultRequestHandler, InMemoryPushNotificationStore, InMemoryTaskStore, JsonRpcTransportHandler,
  UnauthenticatedUser, defaultServerCallContextBuilder,
} from '@a2a-js/sdk/server';
import type { AgentExecutor, ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { listen } from './helpers.js';

/** One JSON-RPC request the A2A server received. */
export interface A2aReceived {
  method: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** A started A2A upstream. */
export interface A2aUpstream {
  url: string;
  received: A2aReceived[];
  /** How many times the agent card was served. */
  cardHits: number;
  /** Sets the URL the card advertises (the gateway's `/a2a`) and its protocol version. */
  advertise(url: string, version: '1.0' | '0.3'): void;
  close(): Promise<void>;
}

class InputRequiredAgent implements AgentExecutor {
  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const text = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], metadata: undefined,
      history: [ctx.userMessage],
      status: {
        state: TaskState.TASK_STATE_INPUT_REQUIRED, timestamp: new Date().toISOString(),
        message: {
          messageId: `reply-${ctx.userMessage.messageId}`, contextId: ctx.contextId, taskId: ctx.taskId,
          role: Role.ROLE_AGENT, parts: [{ content: { $case: 'text', value: `echo: ${text}` } } as never],
          metadata: undefined, extensions: [], referenceTaskIds: [],
        },
      },
    }));
    bus.finished();
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: '', metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, timestamp: new Date().toISOString(), message: undefined },
    }));
    bus.finished();
  }
}

function cardJson(url: string, version: string): Record<string, unknown> {
  return {
    name: 'agent-authz test agent', description: 'Echoes, and keeps every task open for input.', version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: version }],
    capabilities: { streaming: true, pushNotifications: true },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [
      { id: 'echo', name: 'Echo', description: 'Echoes the message', tags: ['test'] },
      { id: 'book_flight', name: 'Book a flight', description: 'Books a flight', tags: ['travel'] },
    ],
  };
}

/** Starts the A2A server: JSON-RPC on `/a2a` (v1.0 and v0.3 names), the card on `/.well-known/agent-card.json`. */
export async function startA2aUpstream(): Promise<A2aUpstream> {
  let card = cardJson('http://127.0.0.1/a2a', '1.0');
  const handler = new DefaultRequestHandler(
    AgentCard.fromJSON(card), new InMemoryTaskStore(), new InputRequiredAgent(), undefined,
    new InMemoryPushNotificationStore(),
  );
  const v1 = new JsonRpcTransportHandler(handler);
  const v03 = new LegacyJsonRpcTransportHandler(handler);
  const received: A2aReceived[] = [];
  const state = { cardHits: 0 };
  const server = await listen((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
          state.cardHits += 1;
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(card));
          return;
        }
        if (req.method !== 'POST' || req.url !== '/a2a') {
          res.writeHead(404).end();
          return;
        }
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        const method = String(body.method);
        received.push({ method, headers: req.headers, body });
        const legacy = method.includes('/');
        const context = defaultServerCallContextBuilder({
          extensions: undefined, user: new UnauthenticatedUser(), headers: req.headers as never,
          requestedVersion: legacy ? '0.3' : '1.0',
        });
        const answer = await (legacy ? v03 : v1).handle(body, context);
        if (answer !== null && typeof answer === 'object' && Symbol.asyncIterator in answer) {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          for await (const event of answer as AsyncIterable<unknown>) res.write(`data: ${JSON.stringify(event)}\n\n`);
          res.end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      })().catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(err));
      });
    });
  });
  return {
    url: server.url,
    received,
    get cardHits() { return state.cardHits; },
    advertise(url: string, version: '1.0' | '0.3') { card = cardJson(url, version); },
    close: server.close,
  };
}
