/**
 * A platform's publish_state machine (src/publishing.ts, issue 32): every state × action, and
 * what publishing requires, refused in a fixed order.
 */
import t from 'tap';
import { PUBLISH_STATES, checkPublish, nextPublishState } from '../../src/publishing.js';
import type { PublishAction, PublishFacts } from '../../src/publishing.js';

const ACTIONS: PublishAction[] = ['publish', 'unpublish', 'domain_lapsed'];

t.test('every state × action', async (t) => {
  const expected: Record<string, string | null> = {
    'draft publish': 'published', 'draft unpublish': null, 'draft domain_lapsed': null,
    'published publish': null, 'published unpublish': 'unpublished', 'published domain_lapsed': 'unpublished',
    'unpublished publish': 'published', 'unpublished unpublish': null, 'unpublished domain_lapsed': null,
  };
  t.equal(PUBLISH_STATES[0], 'draft', 'draft is the initial state (spec 2.1)');
  for (const s of PUBLISH_STATES) {
    for (const a of ACTIONS) {
      const want = expected[`${s} ${a}`];
      const got = nextPublishState(s, a);
      t.same(got, want === null ? { ok: false, code: 'publish_state_invalid' } : { ok: true, state: want }, `${s} --${a}-->`);
    }
  }
});

t.test('publishing requires an organisation, a verified domain, a callback and a description, in that order', async (t) => {
  const ready: PublishFacts = { organisation: true, domainVerified: true, callbackUrl: 'https://p.example.org/hook', description: 'Books meetings.' };
  t.same(checkPublish('draft', ready), { ok: true, state: 'published' });
  t.same(checkPublish('unpublished', ready), { ok: true, state: 'published' }, 'republishing');
  t.same(checkPublish('published', ready), { ok: false, code: 'publish_state_invalid' }, 'already published');
  const cases: [Partial<PublishFacts>, string][] = [
    [{ organisation: false, domainVerified: false }, 'account_type_not_supported'],
    [{ domainVerified: false, callbackUrl: null }, 'publisher_domain_unverified'],
    [{ callbackUrl: null, description: null }, 'callback_url_required'],
    [{ callbackUrl: '  ' }, 'callback_url_required'],
    [{ description: null }, 'description_required'],
    [{ description: '\t' }, 'description_required'],
  ];
  for (const [change, code] of cases) {
    t.same(checkPublish('draft', { ...ready, ...change }), { ok: false, code }, `${JSON.stringify(change)} → ${code}`);
  }
});
