/**
 * The feature script of the MCP comparison test (issue 31): what an SDK
 * client does with the MCP reference server, written once and run twice —
 * directly and through the gateway — so the two transcripts can be compared.
 *
 * It covers tools (text, sum, image), resources (list, templates, read,
 * subscribe/unsubscribe), prompts (list, get, completion), logging level,
 * progress, sampling, form and URL elicitation (request path and the -32042
 * error path), tasks (a task-augmented tool call with its status polling,
 * `tasks/result`, `tasks/get`, `tasks/list`), ping, cancellation,
 * resumption of a cut stream with `Last-Event-ID`, and session deletion.
 */

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** A transport the script can end and resume (the SDK's, or the agent's wrapping of it). */
export type ScriptTransport = Transport & { terminateSession(): Promise<void>; sessionId?: string };

/** Makes a transport; `sessionId` re-attaches to an existing session (resumption). */
export type MakeTransport = (sessionId?: string) => ScriptTransport;

/** Keys whose values differ between two runs of the same script (ids, times). */
const VARYING = new Set(['sessionId', 'requestId', 'progressToken', 'timestamp', 'taskId', 'createdAt', 'lastUpdatedAt', 'elicitationId']);

/** Replaces the values that differ between two runs (ids, times, random numbers) with placeholders. */
export function normalize(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (key, v: unknown) => {
    if (VARYING.has(key)) return '<varies>';
    if (typeof v === 'string') return v.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>');
    return v;
  })) as unknown;
}

/** Waits until `ready()` or `ms` has passed; polls every 20 ms. */
async function until(ready: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!ready() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20));
  return ready();
}

/** A client with the capabilities the script uses, answering sampling and both kinds of elicitation. */
function newClient(elicited: string[]): Client {
  const client = new Client({ name: 'everything-test', version: '1.0.0' }, {
    capabilities: { sampling: {}, elicitation: { form: {}, url: {} } },
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${JSON.stringify(req.params.messages[0]?.content)}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    const params = req.params as { mode?: string; url?: string; requestedSchema?: { properties?: Record<string, unknown> } };
    elicited.push(params.mode === 'url' ? `url ${params.url ?? ''}` : `form ${Object.keys(params.requestedSchema?.properties ?? {}).join(',')}`);
    if (params.mode === 'url') return { action: 'accept' };
    if (params.requestedSchema?.properties?.interpretation !== undefined) return { action: 'accept', content: { interpretation: 'technical' } };
    return { action: 'accept', content: { color: 'green', number: 3, pets: 'Dogs' } };
  });
  return client;
}

/** Tools, resources, prompts, completion, logging, progress, sampling and form elicitation. */
async function basics(client: Client, out: Record<string, unknown>): Promise<void> {
  out.server = client.getServerVersion();
  out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
  out.echo = await client.callTool({ name: 'echo', arguments: { message: 'hello' } });
  out.sum = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } });
  out.image = await client.callTool({ name: 'get-tiny-image', arguments: {} });
  const resources = await client.listResources();
  out.resources = resources.resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate);
  const first = resources.resources[0]?.uri ?? 'none';
  out.read = await client.readResource({ uri: first });
  out.subscribe = await client.subscribeResource({ uri: first });
  out.unsubscribe = await client.unsubscribeResource({ uri: first });
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
  out.prompt = await client.getPrompt({ name: 'simple-prompt' });
  out.completion = await client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } });
  out.logging = await client.setLoggingLevel('debug');
  const progress: number[] = [];
  out.longRun = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, {
    onprogress: (p) => { progress.push(p.progress); },
  });
  out.progress = progress;
  out.sampling = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 5 } });
  out.elicitation = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
}

/** URL elicitation: the request path, then the error path (-32042) and its retry. */
async function urlElicitation(client: Client, out: Record<string, unknown>): Promise<void> {
  const args = { url: 'https://example.com/authorize', elicitationId: 'fixed-id' };
  out.urlRequest = await client.callTool({ name: 'trigger-url-elicitation', arguments: args });
  const failed = await client.callTool({ name: 'trigger-url-elicitation', arguments: { ...args, errorPath: true } }).then(
    (r) => ({ resolved: r }),
    (err: { code?: number; message?: string; data?: unknown }) => ({ code: err.code, message: err.message, data: err.data }),
  );
  out.urlError = failed;
  out.urlRetry = await client.callTool({ name: 'trigger-url-elicitation', arguments: { ...args, errorPath: true } });
}

/** Tasks: a task-augmented call that needs a clarification (input_required answered through `tasks/result`). */
async function tasks(client: Client, out: Record<string, unknown>): Promise<void> {
  const kinds: string[] = [];
  let taskId = '';
  let result: unknown;
  const stream = client.experimental.tasks.callToolStream({ name: 'simulate-research-query', arguments: { topic: 'python', ambiguous: true } },
    CallToolResultSchema, { task: { ttl: 60_000 } });
  for await (const message of stream) {
    if (kinds.at(-1) !== message.type) kinds.push(message.type);
    if (message.type === 'taskCreated') taskId = message.task.taskId;
    if (message.type === 'result') result = message.result;
    if (message.type === 'error') result = { error: message.error.message };
  }
  out.taskKinds = [kinds[0], kinds.at(-1)];
  out.taskResult = result;
  out.taskGet = await client.experimental.tasks.getTask(taskId);
  out.taskListed = (await client.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === taskId);
}

/** Cuts a progress stream after two events and resumes it on a new connection with `Last-Event-ID`. */
async function resumption(make: MakeTransport, sessionId: string, elicited: string[], out: Record<string, unknown>): Promise<void> {
  const tokens: string[] = [];
  const first = newClient(elicited);
  const transport = make(sessionId);
  await first.connect(transport);
  const params = { name: 'trigger-long-running-operation', arguments: { duration: 2, steps: 8 } };
  const cut = first.request({ method: 'tools/call', params }, CallToolResultSchema, {
    onprogress: () => undefined, onresumptiontoken: (token) => { tokens.push(token); },
  }).then(() => 'completed', () => 'cut');
  out.resumeTokens = await until(() => tokens.length >= 2, 20_000);
  await first.close();
  out.resumeCut = await cut;
  const second = newClient(elicited);
  await second.connect(make(sessionId));
  const replayed: number[] = [];
  out.resumed = await second.request({ method: 'tools/call', params }, CallToolResultSchema, {
    resumptionToken: tokens.at(-1), onprogress: (p) => { replayed.push(p.progress); },
  });
  out.resumedProgressEndsAtLast = replayed.at(-1) === 8;
  await second.close();
}

/** Runs the whole script on transports from `make`; returns the normalized transcript. */
export async function script(make: MakeTransport): Promise<Record<string, unknown>> {
  const elicited: string[] = [];
  const transport = make();
  const client = newClient(elicited);
  await client.connect(transport);
  const out: Record<string, unknown> = {};
  await basics(client, out);
  await urlElicitation(client, out);
  await tasks(client, out);
  out.ping = await client.ping();
  const abort = new AbortController();
  const cancelled = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 5, steps: 5 } }, undefined, { signal: abort.signal });
  setTimeout(() => abort.abort('changed my mind'), 300);
  out.cancelled = await cancelled.then(() => 'completed', (err: Error) => `rejected: ${err.message}`);
  const session = transport.sessionId;
  if (session === undefined) throw new Error('no session id after initialize');
  await resumption(make, session, elicited, out);
  out.elicited = elicited;
  await transport.terminateSession();
  out.terminated = transport.sessionId === undefined;
  await client.close();
  return normalize(out) as Record<string, unknown>;
}
