/**
 * Browser harness of the console tests: Debian's Chromium (/usr/bin/chromium)
 * driven by playwright-core with a fresh profile (no browser is ever
 * downloaded), plus the checks every page gets: axe-core (no serious or
 * critical violation), no Content-Security-Policy violation and no page
 * error, and a screenshot (into SHOTS). `tabTo` reaches a control with
 * the Tab key alone, as a keyboard user would; `focusedOnceOn` waits for
 * the focus a page moves by itself.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { BrowserContext, Locator, Page } from 'playwright-core';

/** The repository root. */
export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/**
 * Where the screenshots go: `.cache/console-screenshots/` on every run, so a test run leaves
 * the work tree clean; `docs/console/` (which docs/console.md shows) with CONSOLE_SCREENSHOTS=docs,
 * when the pictures in the docs should be refreshed.
 */
export const SHOTS = process.env.CONSOLE_SCREENSHOTS === 'docs' ? path.join(REPO, 'docs', 'console') : path.join(REPO, '.cache', 'console-screenshots');
/** Debian's Chromium. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** A running browser with one context and page, and what the page reported. */
export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Page errors, console errors and CSP violations seen so far. */
  problems: string[];
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh user-data directory. */
export async function launch(o: { clock?: boolean } = {}): Promise<Browser> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'console-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, timeout: 30_000,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    viewport: { width: 1200, height: 820 }, locale: 'en-US', timezoneId: 'UTC', colorScheme: 'light',
  });
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // A refused API call logs "Failed to load resource" (a 4xx the test causes on purpose); anything else is a problem.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  await page.addInitScript({ content: "document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));" });
  if (o.clock) await page.clock.install();
  return {
    context, page, problems,
    async close() {
      await context.close().catch(() => undefined);
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Runs axe-core on the page; returns the serious and critical violations as lines. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (ctx: unknown, o: unknown) => Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: unknown }[] }[] }> } }).axe;
    const r = await axe.run((globalThis as any).document, { resultTypes: ['violations'] }); // eslint-disable-line @typescript-eslint/no-explicit-any
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => JSON.stringify(n.target)).slice(0, 3) }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.targets.join(', ')}`);
}

/** Saves a full-page screenshot as <SHOTS>/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true, animations: 'disabled', caret: 'hide' });
}

/** A short description of the focused element (for messages). */
export function focused(page: Page): Promise<string> {
  return page.evaluate(() => {
    const a = (globalThis as any).document.activeElement; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (!a) return '(none)';
    return `${String(a.tagName).toLowerCase()}${a.id ? `#${a.id}` : ''} "${String(a.getAttribute('aria-label') ?? a.textContent ?? a.value ?? '').trim().slice(0, 60)}"`;
  });
}

/**
 * The focused element's description once `selector` has the focus; after `ms` without it, the
 * description of whatever has it (for the assertion's message). For focus a page moves in an
 * effect after it renders, which a test must wait for rather than read at once.
 */
export async function focusedOnceOn(page: Page, selector: string, ms = 5000): Promise<string> {
  await page.locator(`${selector}:focus`).waitFor({ timeout: ms }).catch(() => undefined);
  return focused(page);
}

/**
 * The locator's text once it matches `re`; after `ms` without a match, its text then (for the
 * assertion's message). For a page that says "done" before it re-renders what changed: a test
 * must wait for the new text rather than read the element at once.
 */
export async function textOnceMatches(locator: Locator, re: RegExp, ms = 5000): Promise<string> {
  const end = Date.now() + ms;
  for (let text = await locator.innerText(); ; text = await locator.innerText()) {
    if (re.test(text) || Date.now() >= end) return text;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Presses Tab (or Shift+Tab) until the element matching `selector` has the focus; at most
 * `max` presses. Throws when it is not reached: then the keyboard cannot get there.
 */
export async function tabTo(page: Page, selector: string, o: { max?: number; back?: boolean } = {}): Promise<void> {
  const max = o.max ?? 80;
  const target = page.locator(selector).first();
  await target.waitFor({ state: 'attached', timeout: 10_000 });
  for (let i = 0; i <= max; i++) {
    // A Playwright selector (CSS plus :text-is() and the like); the first match counts.
    if (await target.evaluate((el) => el === (el.ownerDocument as { activeElement: unknown }).activeElement, undefined, { timeout: 2000 })) return;
    await page.keyboard.press(o.back ? 'Shift+Tab' : 'Tab');
  }
  throw new Error(`the keyboard did not reach ${selector} in ${max} Tab presses (focus is on ${await focused(page)})`);
}
