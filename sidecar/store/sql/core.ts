/**
 * The statement layer both engines share: a tagged template that writes a SQL
 * statement once (`sql\`… WHERE id = ${id}\``), compiled per engine (`?` for
 * SQLite, `$n` for PostgreSQL), and units of work written once as generators
 * that yield statements: the SQLite engine runs them synchronously inside its
 * `BEGIN IMMEDIATE` (and group commit), the PostgreSQL engine awaits each one
 * on a pooled client. A few words differ between the dialects ({@link pick});
 * a work that must differ more asks {@link dialectOf}.
 */

/** The two SQL dialects. */
export type Dialect = 'sqlite' | 'pg';

/** Text that differs per dialect, spliced into a statement as SQL (never a parameter). */
export class Fragment {
  readonly sqlite: string;
  readonly pg: string;
  constructor(sqlite: string, pg: string) {
    this.sqlite = sqlite;
    this.pg = pg;
  }
}

/** One statement: the template's text pieces and its values (parameters, fragments or nested statements). */
export class Sql {
  readonly strings: readonly string[];
  readonly values: readonly unknown[];
  constructor(strings: readonly string[], values: readonly unknown[]) {
    this.strings = strings;
    this.values = values;
  }
}

/** Writes a statement; each `${value}` is a bound parameter unless it is a {@link Sql} or a {@link Fragment}. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  return new Sql(strings, values);
}

/** SQL text that differs per dialect (`pick('MAX', 'GREATEST')`). */
export const pick = (sqlite: string, pg: string): Fragment => new Fragment(sqlite, pg);
/** Text spliced as is in both dialects (a trusted constant, never input). */
export const raw = (text: string): Fragment => new Fragment(text, text);
/** Joins statements with `sep` (e.g. the optional conditions of a WHERE). */
export function join(parts: readonly Sql[], sep: string): Sql {
  const strings = [''];
  parts.forEach((_, i) => { strings.push(i < parts.length - 1 ? sep : ''); });
  return new Sql(strings, parts);
}

/** Values as a comma-separated list of parameters (`IN (…)`, a function's arguments). */
export const list = (values: readonly unknown[]): Sql => join(values.map((v) => sql`${v}`), ', ');
/** The conditions that are given, joined by AND (a WHERE with optional filters). */
export const and = (parts: readonly (Sql | false | undefined)[]): Sql =>
  join(parts.filter((p): p is Sql => p instanceof Sql), ' AND ');

/** Row-lock suffix of a SELECT: PostgreSQL locks; SQLite has one writer, so nothing to lock. */
export const FOR_UPDATE = pick('', ' FOR UPDATE');
/** As {@link FOR_UPDATE}, skipping rows another replica holds. */
export const SKIP_LOCKED = pick('', ' FOR UPDATE SKIP LOCKED');
/** The insertion-order column of tables keyed by id (SQLite's rowid, PostgreSQL's identity `seq`). */
export const SEQ = pick('rowid', 'seq');

/** The text of statements whose values are all parameters, by template and dialect (compiled once per call site). */
const plain = { sqlite: new WeakMap<readonly string[], string>(), pg: new WeakMap<readonly string[], string>() };
const isParam = (v: unknown): boolean => !(v instanceof Sql) && !(v instanceof Fragment);

/** Compiles `s` for `dialect`: the text with its placeholders, and the parameters in order. */
export function compile(s: Sql, dialect: Dialect): { text: string; params: unknown[] } {
  if (s.values.every(isParam)) {
    let text = plain[dialect].get(s.strings);
    if (text === undefined) {
      text = s.strings.reduce((acc, part, i) => `${acc}${dialect === 'pg' ? `$${i}` : '?'}${part}`);
      plain[dialect].set(s.strings, text);
    }
    return { text, params: s.values as unknown[] };
  }
  const params: unknown[] = [];
  const walk = (q: Sql): string => {
    let text = q.strings[0]!;
    q.values.forEach((v, i) => {
      if (v instanceof Sql) text += walk(v);
      else if (v instanceof Fragment) text += v[dialect];
      else { params.push(v); text += dialect === 'pg' ? `$${params.length}` : '?'; }
      text += q.strings[i + 1]!;
    });
    return text;
  };
  return { text: walk(s), params };
}

/** A bytes parameter as a Buffer view (no copy), which both drivers bind as a BLOB / bytea. */
export const bytes = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** What a work yields: one statement to run (`only`: on that dialect alone), or the question of the dialect. */
export type Op =
  | { kind: 'all' | 'get' | 'run'; stmt: Sql; only?: Dialect }
  | { kind: 'dialect' };

/** A unit of work that yields statements and returns `T`. */
export type Work<T> = Generator<Op, T, unknown>;

/** All rows of a query. */
export function* all<R>(stmt: Sql): Work<R[]> {
  return (yield { kind: 'all', stmt }) as R[];
}
/** The first row of a query, or undefined. */
export function* get<R>(stmt: Sql): Work<R | undefined> {
  return (yield { kind: 'get', stmt }) as R | undefined;
}
/** Runs a statement; the number of rows it changed. */
export function* run(stmt: Sql): Work<number> {
  return (yield { kind: 'run', stmt }) as number;
}
/** Runs a statement on PostgreSQL only (a lock or a setting SQLite's single writer needs not). */
export function* pgOnly(stmt: Sql): Work<void> {
  yield { kind: 'run', stmt, only: 'pg' };
}
/** The dialect the work runs on. */
export function* dialectOf(): Work<Dialect> {
  return (yield { kind: 'dialect' }) as Dialect;
}

/** How a write is committed. */
export interface WriteOptions {
  /**
   * Join SQLite's group commit (the transactions of one event-loop turn share one COMMIT;
   * each resolves after it). No effect on PostgreSQL.
   */
  group?: boolean;
  /**
   * PostgreSQL: commit without waiting for the WAL flush (`synchronous_commit` off); the
   * caller passes {@link Runner.flushBarrier} before it acknowledges. No effect on SQLite.
   */
  lazy?: boolean;
}

/**
 * An engine as the shared stores see it. `read` runs outside a transaction; `tx` runs the
 * work in one transaction on both engines; `write` in one on SQLite (its only way to write)
 * but statement by statement on PostgreSQL, where each is atomic by itself and a transaction
 * would cost two more round trips (or, for a SELECT after an INSERT that waited, the wrong
 * snapshot).
 */
export interface Runner {
  readonly dialect: Dialect;
  read<T>(work: Work<T>): Promise<T>;
  write<T>(work: Work<T>, o?: WriteOptions): Promise<T>;
  tx<T>(work: Work<T>, o?: WriteOptions): Promise<T>;
  /** Resolves once every commit so far is durable (PostgreSQL's flush barrier; SQLite commits durably). */
  flushBarrier(): Promise<void>;
}

/** Runs `work` to its end, answering each op with `exec` (synchronous: SQLite). */
export function driveSync<T>(
  work: Work<T>, dialect: Dialect, exec: (op: Exclude<Op, { kind: 'dialect' }>) => unknown,
): T {
  let r = work.next();
  while (!r.done) {
    const op = r.value;
    r = work.next(op.kind === 'dialect' ? dialect : op.only && op.only !== dialect ? undefined : exec(op));
  }
  return r.value;
}

/** Runs `work` to its end, awaiting each op (PostgreSQL). */
export async function drive<T>(
  work: Work<T>, dialect: Dialect, exec: (op: Exclude<Op, { kind: 'dialect' }>) => Promise<unknown>,
): Promise<T> {
  let r = work.next();
  while (!r.done) {
    const op = r.value;
    r = work.next(op.kind === 'dialect' ? dialect : op.only && op.only !== dialect ? undefined : await exec(op));
  }
  return r.value;
}
