/**
 * `/metrics` after a real flow: the exposition is valid (strict parser, and
 * `promtool check metrics` when installed), the decision counters moved, and
 * the served metric families match the list in docs/operations.md (and in
 * README.md when it carries the markers) exactly, both ways, with type and help.
 */
import path from 'node:path';
import t from 'tap';
import { present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import {
  REPO, docMetricsBlock, parsePrometheusText, promtoolAvailable, promtoolCheck, readDocMetrics, sampleValue,
} from './helpers.js';
import type { Family } from './helpers.js';

async function scrape(sc: TestSidecar): Promise<{ text: string; families: Map<string, Family>; contentType: string | null }> {
  const r = await fetch(`${sc.url}/metrics`);
  if (r.status !== 200) throw new Error(`/metrics: ${r.status}`);
  const text = await r.text();
  return { text, families: parsePrometheusText(text), contentType: r.headers.get('content-type') };
}

t.test('metrics after a real flow', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  const before = await scrape(sc);
  t.match(before.contentType, /^text\/plain; version=0\.0\.4/);
  t.equal(sampleValue(before.families, 'agent_authz_verify_decisions_total', 'agent_authz_verify_decisions_total', { decision: 'allow' }), undefined, 'no decision yet');

  const f = await specFlow(sc, 'metrics@example.com', { approve: ['data:read'] });
  const allow = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' });
  t.equal(allow.body?.decision, 'allow');
  const deny = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:write' });
  t.equal(deny.body?.decision, 'deny');
  t.equal(deny.body?.decision_reason, 'not_delegated');
  const badKey = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' }, { apiKey: `aak_000000000000_${'A'.repeat(43)}` });
  t.equal(badKey.status, 401);

  const after = await scrape(sc);
  const fam = after.families;
  const v = (family: string, labels: Record<string, string>, name = family) => sampleValue(fam, family, name, labels);
  t.equal(v('agent_authz_verify_decisions_total', { decision: 'allow', reason: 'authorized' }), 1, 'allow counted');
  t.equal(v('agent_authz_verify_decisions_total', { decision: 'deny', reason: 'not_delegated' }), 1, 'deny counted');
  t.equal(v('agent_authz_verify_errors_total', { code: 'invalid_api_key' }), 1, '401 counted by code');
  t.equal(v('agent_authz_challenges_total', { event: 'issued' }), 3);
  t.equal(v('agent_authz_challenges_total', { event: 'consumed' }), 2);
  t.equal(v('agent_authz_verify_duration_seconds', { outcome: 'allow' }, 'agent_authz_verify_duration_seconds_count'), 1);
  t.equal(v('agent_authz_verify_duration_seconds', { outcome: 'deny' }, 'agent_authz_verify_duration_seconds_count'), 1);
  t.equal(v('agent_authz_present_duration_seconds', {}, 'agent_authz_present_duration_seconds_count'), 3);
  t.equal(v('agent_authz_sign_duration_seconds', { kind: 'proof' }, 'agent_authz_sign_duration_seconds_count'), 3);
  t.equal(v('agent_authz_crypto_tasks_total', { op: 'sign', thread: 'worker' }), 3, 'proofs signed on a worker');
  t.equal((v('agent_authz_crypto_tasks_total', { op: 'verify', thread: 'main' }) ?? 0) + (v('agent_authz_crypto_tasks_total', { op: 'verify', thread: 'worker' }) ?? 0), 2, 'proof signatures checked, on either thread');
  t.ok((v('agent_authz_sqlite_transaction_duration_seconds', { result: 'commit' }, 'agent_authz_sqlite_transaction_duration_seconds_count') ?? 0) > 0, 'transactions observed');
  const credits = fam.get('agent_authz_credits_remaining_dollars')!.samples;
  t.equal(credits.length, 1, 'one onboarded account');
  t.ok(credits[0]!.value > 0 && credits[0]!.value < 10, 'two verifications debited');
  t.match(credits[0]!.labels.account, /^[0-9a-f-]{8}$/, 'account label: an 8-character id prefix');
  t.equal(v('agent_authz_webhook_outbox_depth', {}), 0, 'no callback URL: nothing pending');
  t.ok(fam.has('process_cpu_seconds_total') && fam.has('nodejs_heap_size_used_bytes'), 'default process metrics');
  t.same([...fam.values()].filter((x) => x.type !== 'counter' && x.name.endsWith('_total')).map((x) => x.name), [], '_total only on counters');
  t.same([...fam.values()].filter((x) => x.type === 'counter' && !x.name.endsWith('_total')).map((x) => x.name), [], 'every counter ends in _total');

  if (promtoolAvailable()) {
    const r = promtoolCheck(after.text);
    t.equal(r.status, 0, `promtool check metrics: ${r.output}`);
    t.equal(r.output.trim(), '', 'no lint findings');
  } else {
    t.comment('promtool not installed: checked with the strict parser only');
  }

  // The documented list matches the served families exactly.
  const served = [...fam.values()];
  const expected = docMetricsBlock(served);
  const docs = [path.join(REPO, 'docs/operations.md'), path.join(REPO, 'README.md')];
  for (const file of docs) {
    const listed = readDocMetrics(file);
    if (listed === undefined) {
      if (file.endsWith('operations.md')) t.fail(`${file}: no metrics markers; expected:\n${expected}`);
      continue;
    }
    const rel = path.relative(REPO, file);
    const listedNames = new Set(listed.map((m) => m.name));
    const missing = served.filter((f) => !listedNames.has(f.name)).map((f) => f.name);
    const extra = listed.filter((m) => !fam.has(m.name)).map((m) => m.name);
    t.same(missing, [], `${rel}: every served metric is listed`);
    t.same(extra, [], `${rel}: every listed metric is served`);
    t.equal(listed.length, listedNames.size, `${rel}: no duplicates`);
    for (const m of listed) {
      const f = fam.get(m.name);
      if (!f) continue;
      t.equal(m.type, f.type, `${rel}: type of ${m.name}`);
      t.equal(m.help, (f.help ?? '').replace(/\n/g, ' '), `${rel}: help of ${m.name}`);
    }
    if (missing.length || extra.length) t.comment(`expected block for ${rel}:\n${expected}`);
  }
});

t.test('the parser is strict', async (t) => {
  t.throws(() => parsePrometheusText('x_total 1\n'), /no preceding # TYPE/);
  t.throws(() => parsePrometheusText('# HELP x h\n# TYPE x counter\nx -1\n'), /negative/);
  t.throws(() => parsePrometheusText('# HELP x h\n# TYPE x gauge\nx 1'), /newline/);
  t.throws(() => parsePrometheusText('# HELP x h\n# TYPE x gauge\nx{a="1"} 1\nx{a="1"} 2\n'), /duplicate series/);
  t.throws(() => parsePrometheusText('# HELP h h\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'), /cumulative/);
  t.throws(() => parsePrometheusText('# HELP h h\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'), /\+Inf/);
  t.throws(() => parsePrometheusText('# HELP x h\n# TYPE x gauge\nx{a="\\q"} 1\n'), /bad escape/);
  const ok = parsePrometheusText('# HELP x a \\\\ b\\nc\n# TYPE x gauge\nx{a="q\\"z"} NaN\n');
  t.equal(ok.get('x')!.help, 'a \\ b\nc');
  t.equal(ok.get('x')!.samples[0]!.labels.a, 'q"z');
});
