/**
 * What the benchmark's SVG writers (the chart and the flame graphs) share:
 * escaping text for XML.
 */

/** `s` with the five XML special characters as character references, safe in SVG text and attributes. */
export function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
