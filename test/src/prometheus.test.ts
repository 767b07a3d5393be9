/**
 * normalizeExposition (src/prometheus.ts): prom-client's `Nan` sample values
 * become `NaN`, nothing else changes, and a registry with the default metrics
 * scraped twice in a row parses with the strict exposition parser.
 */
import t from 'tap';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { normalizeExposition } from '../../src/prometheus.js';
import { parsePrometheusText } from '../sidecar/ops/helpers.js';

t.test('Nan sample values are spelled NaN; labels and names are untouched', async (t) => {
  const registry = new Registry();
  const g = new Gauge({ name: 'x_ratio', help: 'Nan in help stays', labelNames: ['k'], registers: [registry] });
  g.set({ k: 'a Nan' }, NaN);
  g.set({ k: 'b' }, 1.5);
  const raw = await registry.metrics();
  t.match(raw, /x_ratio\{k="a Nan"\} Nan\n/, 'prom-client writes Nan (if this fails, prom-client fixed it and the helper is a no-op)');
  const fixed = normalizeExposition(raw);
  t.match(fixed, /x_ratio\{k="a Nan"\} NaN\n/);
  t.match(fixed, /# HELP x_ratio Nan in help stays\n/, 'help text untouched');
  t.match(fixed, /x_ratio\{k="b"\} 1\.5\n/);
  t.equal(fixed.replace(/ NaN\n/g, ' Nan\n'), raw, 'only the value changed');
  t.equal(normalizeExposition('a 1\nb Nan\nc{k="x Nan"} Nan'), 'a 1\nb NaN\nc{k="x Nan"} NaN', 'mid-text and at the very end');
  t.equal(normalizeExposition('# HELP n Nan\nn{k="a Nan"} 2\n'), '# HELP n Nan\nn{k="a Nan"} 2\n', 'comments and label values stay');
  t.equal(normalizeExposition('x{k="v"} 1\n'), 'x{k="v"} 1\n', 'no NaN: same text');
  const parsed = parsePrometheusText(fixed);
  t.ok(Number.isNaN(parsed.get('x_ratio')!.samples.find((s) => s.labels.k === 'a Nan')!.value), 'the strict parser reads NaN');
});

t.test('default metrics scraped twice in a row parse strictly', async (t) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  await registry.metrics();
  for (let i = 0; i < 3; i++) {
    const text = normalizeExposition(await registry.metrics());
    t.doesNotThrow(() => parsePrometheusText(text), `scrape ${i + 2}`);
    t.notMatch(text, / Nan(\n| |$)/, 'no Nan left');
  }
});
