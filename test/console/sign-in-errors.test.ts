/**
 * The sign-in page's refusals in a real browser against a real sidecar:
 * a wrong code counts down the tries, the last wrong try says none are left,
 * the next try is "locked" (even with the right code), an old code "expired",
 * and asking for codes too fast is "rate limited" with the wait (the API's
 * retry_after), counting down with the buttons held until it is over.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import { axeViolations, launch, screenshot, tabTo } from './browser.js';
import { expectNoProblems } from './steps.js';

t.test('wrong, locked, expired, rate limited', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0, sendCodePerMinute: 2 });
  const b = await launch({ clock: true });
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;
  const email = 'linus@example.com';
  const alert = page.getByRole('alert');
  const tryCode = async (code: string, expect: RegExp): Promise<void> => {
    await page.locator('#code').fill(code);
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: expect }).waitFor();
  };

  await page.goto(`${sc.url}/console/sign-in`);
  await tabTo(page, '#email');
  await page.keyboard.type(email);
  await page.keyboard.press('Enter');
  await page.locator('#code:focus').waitFor();
  const code = await sc.mail.codeFor(email);
  const wrong = code === '000000' ? '111111' : '000000';
  for (let left = 4; left >= 1; left--) await tryCode(wrong, new RegExp(`^That code is not right\\. ${left} (try|tries) left\\.$`));
  await tryCode(wrong, /^That code is not right, and it has no tries left\. Request a new code\.$/);
  await tryCode(code, /^Too many wrong tries: this code is locked\. Request a new code\.$/);
  t.pass('five wrong tries, then locked even with the right code');
  t.same(await axeViolations(page), []);
  await screenshot(page, 'sign-in-locked');

  const mails = async (n: number): Promise<void> => {
    const deadline = Date.now() + 5000;
    while (sc.mail.messages.filter((m) => m.to === email).length < n) {
      if (Date.now() > deadline) throw new Error(`no e-mail number ${n}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const send = page.getByRole('button', { name: 'Send a new code' });
  await send.click();
  await mails(2);
  await page.getByText(/^A new code is on its way to linus@example\.com; the earlier one no longer works\.$/).waitFor();
  const second = await sc.mail.codeFor(email);
  sc.clock.advance(11 * 60_000);
  await tryCode(second, /^This code has expired \(codes last 10 minutes\)\. Request a new code\.$/);
  t.pass('an expired code');

  await send.click();
  await mails(3);
  await send.click();
  await mails(4);
  await send.click();
  await alert.filter({ hasText: /^Too many attempts\./ }).waitFor();
  const text = (await alert.textContent())!;
  const wait = /retry in (\d+) s\. You can try again in (\d+) seconds?\.$/.exec(text);
  t.ok(wait, `the wait is shown: ${text}`);
  t.equal(wait![1], wait![2], 'as the API gives it');
  t.ok(await send.isDisabled(), 'the buttons wait too');
  t.same(await axeViolations(page), []);
  await screenshot(page, 'sign-in-rate-limited');
  await page.clock.fastForward(Number(wait![2]) * 1000 + 1500);
  await page.waitForFunction(() => !(globalThis as unknown as { document: { querySelector(s: string): { disabled: boolean } | null } })
    .document.querySelector('button[type=button]:not(.link)')?.disabled);
  t.pass('the buttons work again after the wait');
  expectNoProblems(t, b);
});
