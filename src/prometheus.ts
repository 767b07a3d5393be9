/**
 * Prometheus text exposition helpers shared by the sidecar and the gateway.
 *
 * prom-client 15 writes a NaN sample value as `Nan`; the exposition format
 * (and strict parsers) spell it `NaN`. It happens whenever the event-loop lag
 * gauges are scraped twice within their sampling interval (no delay was
 * recorded in between, so their mean and standard deviation are NaN).
 */

/**
 * Returns `text` (prom-client's exposition) with every `Nan` sample value
 * spelled `NaN`. Only sample lines are touched (not `# HELP` / `# TYPE`), and
 * only their last token: prom-client writes `name[{labels}] value` without a
 * timestamp, and a label value cannot contain a raw newline.
 */
export function normalizeExposition(text: string): string {
  return text.includes(' Nan') ? text.replace(/^([^#\n].*) Nan$/gm, '$1 NaN') : text;
}
