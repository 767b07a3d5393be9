/**
 * The certificate constraints as a JSON Schema (`components.schemas.Constraints`
 * of `GET /openapi.json`): the approve body's `constraints` and the
 * `constraints` of approvals and certificates (docs/constraints.md).
 *
 * The rules are the ones `validateConstraints` (src/constraints.ts) enforces.
 * Where src/ exports them they are imported, not copied: the kinds' periods
 * and days, the amount syntax, the limits' bounds, the scope vocabulary and
 * custom-scope rules, the list bound. The rest is restated here as patterns:
 * currency, method, tenant and `HH:MM` syntax, IP addresses and CIDRs (the
 * grammar of Node's `net.isIP`), and the normalized form of a path prefix
 * (src/path.ts). The compiler checks that this schema's type is exactly
 * `Constraints`; `test/sidecar/ops/openapi-constraints.test.ts` checks that it
 * accepts and refuses what the validator does, on a table of samples and on
 * generated ones. The one rule a JSON Schema cannot state is left to the
 * validator and said in the description: a `time_window` may not end when it
 * starts. Fastify serializes approvals and certificates with this schema, so
 * it must never refuse what the validator accepted (the tests check that
 * direction first).
 */
import { Type } from '@sinclair/typebox';
import type { Static, TSchema } from '@sinclair/typebox';
import { AMOUNT_RE } from '../../src/amount.js';
import { DAYS } from '../../src/constraints.js';
import type { Constraints as ConstraintsType } from '../../src/constraints.js';
import { BUDGET_PERIODS, CALL_PERIODS, MAX_CALLS_COUNT } from '../../src/limits.js';
import { CANONICAL_SCOPES, CUSTOM_SCOPE_RULES, MAX_SCOPES_PER_LIST } from '../../src/scopes.js';

/** The body of a `^…$` regular expression, for composing patterns. */
const inner = (re: RegExp): string => re.source.replace(/^\^/, '').replace(/\$$/, '');
const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const AMOUNT = AMOUNT_RE.source;
/** A budget: the amount syntax, at most 9 integer digits (`MAX_BUDGET_MICROS`), not zero. */
const BUDGET_AMOUNT = '^(?!0+(?:\\.0+)?$)(0|[1-9][0-9]{0,8})(\\.[0-9]{1,6})?$';
const CURRENCY = '^[A-Z]{3}$';
const HHMM = '^([01][0-9]|2[0-3]):[0-5][0-9]$';

/** IPv4 and IPv6 as Node's `net.isIP` reads them (its grammar, lib/internal/net.js), then an optional `/prefix` of 1–3 digits. */
const V4_SEG = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
const V4 = `(?:${V4_SEG}\\.){3}${V4_SEG}`;
const H = '[0-9a-fA-F]{1,4}';
const V6 = [
  `(?:${H}:){7}(?:${H}|:)`,
  `(?:${H}:){6}(?:${V4}|:${H}|:)`,
  `(?:${H}:){5}(?::${V4}|(?::${H}){1,2}|:)`,
  `(?:${H}:){4}(?:(?::${H}){0,1}:${V4}|(?::${H}){1,3}|:)`,
  `(?:${H}:){3}(?:(?::${H}){0,2}:${V4}|(?::${H}){1,4}|:)`,
  `(?:${H}:){2}(?:(?::${H}){0,3}:${V4}|(?::${H}){1,5}|:)`,
  `(?:${H}:){1}(?:(?::${H}){0,4}:${V4}|(?::${H}){1,6}|:)`,
  `(?::(?:(?::${H}){0,5}:${V4}|(?::${H}){1,7}|:))`,
].join('|');
const V4_PREFIX = '(?:0{0,2}[0-9]|0?[12][0-9]|0?3[0-2])';
const V6_PREFIX = '(?:0{0,2}[0-9]|0?[1-9][0-9]|1[01][0-9]|12[0-8])';
const V6_ZONE = '(?:%[0-9a-zA-Z.:-]{1,})?';
const IP_OR_CIDR = `^(?:${V4}(?:/${V4_PREFIX})?|(?:${V6})${V6_ZONE}(?:/${V6_PREFIX})?)$`;

/**
 * A path prefix in the gateway's normalized form that matches on segment boundaries: starts with
 * `/`, at most 512 characters of RFC 3986 `pchar` and `/` without `%` or `;`, no doubled slash,
 * no `..`, no `.` segment.
 */
const PATH_PREFIX = "^(?!.*//)(?!.*\\.\\.)(?!(?:.*/)?\\.(?:/|$))/[A-Za-z0-9._~!$&'()*+,=:@/-]{0,511}$";

/** A scope of the vocabulary: canonical, or `custom:` and 1–8 segments. */
const SEGMENT = inner(CUSTOM_SCOPE_RULES.segment);
const CUSTOM_SCOPE = `${escape(CUSTOM_SCOPE_RULES.prefix)}${SEGMENT}(?::${SEGMENT}){0,${CUSTOM_SCOPE_RULES.maxSegments - 1}}`;
const SCOPE = `^(?:${Object.keys(CANONICAL_SCOPES).map(escape).join('|')}|${CUSTOM_SCOPE})$`;

const Money = (what: string, amount: string) => Type.Object({
  amount: Type.String({ pattern: amount, description: `${what}: a decimal string such as "50.00".` }),
  currency: Type.String({ pattern: CURRENCY, description: 'Three uppercase letters (ISO 4217).' }),
}, { additionalProperties: false });
const List = <T extends TSchema>(item: T, description: string) => Type.Array(
  item, { minItems: 1, maxItems: MAX_SCOPES_PER_LIST, description });
const Enum = <T extends readonly string[]>(values: T, description: string) => Type.Unsafe<T[number]>(
  { type: 'string', enum: [...values], description });

/** The schema of a certificate's constraints; every member optional, no other member allowed. */
export const ConstraintsSchema = Type.Object({
  max_amount: Type.Optional(Money('At most this per request, for `payments:*` scopes', AMOUNT)),
  methods: Type.Optional(List(Type.String({ pattern: '^[A-Z]{1,16}$' }), 'Allowed HTTP methods (uppercase).')),
  path_prefixes: Type.Optional(List(Type.String({ pattern: PATH_PREFIX }),
    'Allowed path prefixes, matched at a `/` boundary, in the gateway\'s normalized form (docs/constraints.md).')),
  client_ips: Type.Optional(List(Type.String({ pattern: IP_OR_CIDR }),
    'Allowed client addresses: IPv4 or IPv6 addresses or CIDRs (`203.0.113.0/24`, `2001:db8::/32`).')),
  tenants: Type.Optional(List(Type.String({ pattern: '^[A-Za-z0-9._:-]{1,128}$' }), 'Allowed tenants.')),
  time_window: Type.Optional(Type.Object({
    days: Type.Optional(Type.Array(Enum(DAYS, 'A day (UTC).'), { minItems: 1,
      description: 'Days the window applies; all days when absent.' })),
    start: Type.String({ pattern: HHMM, description: '`HH:MM` UTC, inclusive.' }),
    end: Type.String({ pattern: HHMM,
      description: '`HH:MM` UTC, exclusive; before `start` spans midnight. Must differ from `start`.' }),
  }, { additionalProperties: false, description: 'A daily window in UTC.' })),
  require_bound_operation: Type.Optional(
    Type.Boolean({ description: 'Only operation-bound proofs are accepted (else deny `operation_unbound`).' })),
  require_approval: Type.Optional(Type.Object({
    scopes: List(Type.String({ pattern: SCOPE, maxLength: CUSTOM_SCOPE_RULES.maxLength }),
      'Scopes whose actions a person must approve one by one.'),
    above: Type.Optional(Money(
      'Only actions above this amount (an action without a comparable amount needs approval too)', AMOUNT)),
  }, { additionalProperties: false,
    description: 'Step-up approval (docs/api.md, Approvals): verify answers deny `approval_required` until a person '
      + 'approves the action.' })),
  budget: Type.Optional(Type.Object({
    amount: Type.String({ pattern: BUDGET_AMOUNT,
      description: 'More than 0, at most 9 integer digits and 6 decimals.' }),
    currency: Type.String({ pattern: CURRENCY, description: 'Three uppercase letters (ISO 4217).' }),
    period: Enum(BUDGET_PERIODS,
      'A calendar window in UTC (a week starts on Monday); `total` is the certificate\'s life.'),
  }, { additionalProperties: false,
    description: 'At most `amount` over the allowed `payments:*` calls per window (else deny `budget_exceeded`).' })),
  max_calls: Type.Optional(Type.Object({
    count: Type.Integer({ minimum: 1, maximum: MAX_CALLS_COUNT }),
    period: Enum(CALL_PERIODS, 'A calendar window in UTC; `total` is the certificate\'s life.'),
  }, { additionalProperties: false,
    description: 'At most `count` allowed calls of any scope per window (else deny `rate_exceeded`).' })),
}, {
  $id: 'Constraints', additionalProperties: false,
  description: 'Delegation constraints (docs/constraints.md). A constraint whose context is missing denies. Unknown '
    + 'members are refused with `invalid_constraints`.',
});

/** `T` when `A` and `B` are the same type, else `never`. */
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends (<X>() => X extends B ? 1 : 2) ? true : never;
// The schema's type is exactly src/constraints.ts's `Constraints` (a compile error otherwise).
const sameType: Same<Static<typeof ConstraintsSchema>, ConstraintsType> = true;
void sameType;
