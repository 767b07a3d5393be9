/**
 * The schema compilers of the sidecar's Fastify instance: Fastify's own — Ajv through
 * `@fastify/ajv-compiler` for the request schemas (body, params, querystring), fast-json-stringify through
 * `@fastify/fast-json-stringify-compiler` for the documented 200 bodies — with the same options, except that each
 * route's schema is compiled when the route first needs it instead of while the server starts.
 *
 * Compiling every route's schemas at start cost about 1 CPU s of the sidecar's 2.5 (the serializers the larger
 * half: each one adds and checks every shared response schema again); a process that answers a few routes —
 * the audit tooling, a short-lived replica, each test's sidecar — paid it for the ~140 routes it never called.
 * Now the first request of a route compiles that route's validator or serializer (a few ms, once); the
 * validation itself is unchanged: the same Ajv, options, schemas and error objects, so a bad request is refused
 * with the same 400 `invalid_request` and path-named message. A schema that fails to compile throws inside the
 * validator, which Fastify answers as an internal error (500 `internal_error`) without running the handler:
 * fail closed. `BuildOptions.compileSchemas: 'ready'` (server.ts) compiles them all before the server is
 * ready instead (test/sidecar/ops/schema-compilers.test.ts does, so every shipped schema is known to compile).
 */
import AjvCompiler from '@fastify/ajv-compiler';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

/** A compiled request validator as Fastify calls it (an Ajv function: `errors` after a `false`). */
interface Validator {
  (data: unknown, dataContext?: unknown): unknown;
  errors?: unknown;
  schemaEnv?: unknown;
}

/** What a compiler receives for one schema of one route (Fastify's route definition). */
type RouteDefinition = Record<string, unknown>;

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/** A serializer as Fastify calls it. */
type Serializer = (doc: unknown) => string;

/** What a compiler factory of the two packages returns for the shared schemas and options. */
type Compiler<F> = (def: RouteDefinition) => F;
type Factory<F> = (externalSchemas: unknown, options: unknown) => Compiler<F>;

/** Lazy compilers for one Fastify instance, and the compilation of whatever is still pending. */
export interface LazyCompilers {
  /** Fastify's `schemaController.compilersFactory`. */
  readonly compilersFactory: CompilersFactory;
  /** Compiles every schema not compiled yet (throws the first failure, naming its route); returns how many. */
  compilePending(): number;
}

/** `compile`'s result, made on the first call of the returned getter (listed in `pending` until then). */
function onFirstUse<F>(compile: () => F, pending: Set<() => unknown>): () => F {
  let fn: F | undefined;
  const get = (): F => {
    if (fn === undefined) { fn = compile(); pending.delete(get); }
    return fn;
  };
  pending.add(get);
  return get;
}

/** A validator that compiles on its first call, then behaves exactly as the compiled Ajv function. */
function lazyValidator(compile: () => Validator, pending: Set<() => unknown>): Validator {
  const get = onFirstUse(compile, pending);
  const validate: Validator = (data, dataContext) => {
    const compiled = get();
    const result = compiled(data, dataContext);
    validate.errors = compiled.errors;
    return result;
  };
  // Fastify passes the parent-data context (`{ parentData, parentDataProperty }`) to a function that has an
  // Ajv `schemaEnv`, as every compiled Ajv validator has: this one hands it on.
  validate.schemaEnv = true;
  return validate;
}

/** A serializer that compiles on its first call. */
function lazySerializer(compile: () => Serializer, pending: Set<() => unknown>): Serializer {
  const get = onFirstUse(compile, pending);
  return (doc) => get()(doc);
}

/** Where a compile error happened, as Fastify's own build errors say it. */
function named(def: RouteDefinition, err: unknown): Error {
  const part = String(def.httpPart ?? `response ${String(def.httpStatus ?? '')}`);
  const message = err instanceof Error ? err.message : String(err);
  return new Error(`${String(def.method)} ${String(def.url)} ${part} schema: ${message}`, { cause: err });
}

/**
 * A Fastify compiler builder over `factory` whose route compilers defer to first use (`lazy`): the factory's
 * compiler itself (an Ajv or serializer instance with every shared schema) is built with the first route
 * compiled; a failure names its route.
 */
function deferredBuilder<F>(factory: Factory<F>, lazy: (compile: () => F) => F) {
  return (externalSchemas: unknown, options: unknown) => {
    let compiler: Compiler<F> | undefined;
    return (def: RouteDefinition): F => lazy(() => {
      try {
        compiler ??= factory(externalSchemas, options);
        return compiler(def);
      } catch (err) {
        throw named(def, err);
      }
    });
  };
}

/**
 * Creates the lazy compilers of one Fastify instance. Fastify builds a compiler from the shared schemas
 * (`app.addSchema`) and its `ajv` / `serializerOpts` options; building it (an Ajv instance with every shared
 * schema) is deferred too, to the first route schema compiled.
 *
 * ```ts
 * const compilers = lazyCompilers();
 * const app = Fastify({ schemaController: { compilersFactory: compilers.compilersFactory } });
 * ```
 */
export function lazyCompilers(): LazyCompilers {
  const pending = new Set<() => unknown>();
  const validators = AjvCompiler() as unknown as Factory<Validator>;
  const serializers = SerializerSelector() as unknown as Factory<Serializer>;
  const buildValidator = deferredBuilder(validators, (compile) => lazyValidator(compile, pending));
  const buildSerializer = deferredBuilder(serializers, (compile) => lazySerializer(compile, pending));
  return {
    compilersFactory: { buildValidator, buildSerializer } as unknown as CompilersFactory,
    compilePending() {
      let n = 0;
      for (const get of [...pending]) { get(); n++; }
      return n;
    },
  };
}
