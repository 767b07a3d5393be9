/**
 * The organisation role table (src/roles.ts, issue 32): what each role may do, and the
 * last-owner rule.
 */
import t from 'tap';
import { PERMISSIONS, ROLES, ROLE_PERMISSIONS, can, checkMembershipChange, isRole } from '../../src/roles.js';
import type { Permission, Role } from '../../src/roles.js';

const ALL = Object.keys(PERMISSIONS) as Permission[];

t.test('the table, role by role', async (t) => {
  const expected: Record<Role, Permission[]> = {
    owner: ALL,
    admin: ['read', 'audit_read', 'platforms_manage'],
    approver: ['read', 'delegations_decide', 'approvals_decide'],
    auditor: ['read', 'audit_read'],
    member: ['read'],
  };
  t.same([...ROLES], ['owner', 'admin', 'approver', 'auditor', 'member']);
  for (const role of ROLES) {
    for (const p of ALL) t.equal(can(role, p), expected[role].includes(p), `${role} ${expected[role].includes(p) ? 'may' : 'may not'} ${p}`);
  }
  t.ok(Object.isFrozen(ROLE_PERMISSIONS) && Object.isFrozen(ROLE_PERMISSIONS.owner), 'the table cannot be changed at run time');
});

t.test('separation of duties: only owners both manage platforms and grant authority', async (t) => {
  const both = ROLES.filter((r) => can(r, 'platforms_manage') && can(r, 'delegations_decide'));
  t.same(both, ['owner']);
  t.same(ROLES.filter((r) => can(r, 'members_manage')), ['owner'], 'only owners manage members');
  t.ok(ROLES.every((r) => can(r, 'read')), 'every role reads');
});

t.test('misuse is a TypeError', async (t) => {
  t.throws(() => can('root' as Role, 'read'), TypeError);
  t.throws(() => can('owner', 'write' as Permission), TypeError);
  t.throws(() => can('owner', 'toString' as Permission), TypeError, 'no inherited names');
  t.throws(() => checkMembershipChange({ from: 'owner', to: null, owners: -1 }), TypeError);
});

t.test('isRole', async (t) => {
  for (const r of ROLES) t.ok(isRole(r));
  for (const v of ['Owner', 'root', '', null, 1, 'constructor', ['owner']]) t.notOk(isRole(v), `${JSON.stringify(v)} is not a role`);
});

t.test('the last owner can neither leave, nor be removed, nor be demoted', async (t) => {
  t.same(checkMembershipChange({ from: 'owner', to: null, owners: 1 }), { ok: false, code: 'last_owner' });
  t.same(checkMembershipChange({ from: 'owner', to: 'admin', owners: 1 }), { ok: false, code: 'last_owner' });
  t.same(checkMembershipChange({ from: 'owner', to: 'owner', owners: 1 }), { ok: true }, 'no change is fine');
  t.same(checkMembershipChange({ from: 'owner', to: null, owners: 2 }), { ok: true }, 'one of two owners may leave');
  t.same(checkMembershipChange({ from: 'owner', to: 'member', owners: 2 }), { ok: true });
  t.same(checkMembershipChange({ from: 'member', to: null, owners: 1 }), { ok: true }, 'a member may leave');
  t.same(checkMembershipChange({ from: 'admin', to: 'owner', owners: 1 }), { ok: true }, 'promotion is fine');
});
