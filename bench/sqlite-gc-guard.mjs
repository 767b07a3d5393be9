// Preloaded (`node --import ./bench/sqlite-gc-guard.mjs`) into the Node 24 sidecar of the
// benchmark ONLY. Works around a crash, not a performance detail:
//
// Node >= 24.19 registers an environment cleanup hook in every node::ObjectWrap and removes it
// in the destructor, which CHECKs that a Node environment is current. better-sqlite3 < 13
// builds Statement on ObjectWrap, so when V8 garbage-collects an unreferenced Statement from
// a GC that runs outside a JS context (idle / platform-task GC), the process aborts:
//   node::RemoveEnvironmentCleanupHook ... Assertion failed: (env) != nullptr
//   Statement::~Statement() [better_sqlite3.node]
// The sidecar makes such garbage at startup (statements of Db.migrate(), pragma()) and on
// every GET /readyz (Db.schemaVersion() prepares a fresh statement), and in our runs most
// Node 24 sidecar starts aborted within seconds. Keeping every prepared Statement reachable
// means none is ever collected, so the destructor never runs from a GC; the leak is a few
// statements plus one per /readyz call. The real fix belongs in the sidecar (see
// docs/benchmarks.md, "Known problems").
import { createRequire } from 'node:module';
import path from 'node:path';

const binding = process.env.SIDECAR_SQLITE_BINDING;
if (binding) {
  const require = createRequire(import.meta.url);
  // Same resolution as better-sqlite3's lib/database.js, so this is the addon object it will use.
  const addon = require(path.resolve(binding).replace(/(\.node)?$/, '.node'));
  const proto = addon.Database.prototype;
  const prepare = proto.prepare;
  const keep = [];
  proto.prepare = function guardedPrepare(...args) {
    const stmt = prepare.apply(this, args);
    keep.push(stmt);
    return stmt;
  };
  globalThis.__benchSqliteStatementsKept = keep;
}
