/**
 * Offline verification of an issued delegation certificate over real HTTP on
 * 127.0.0.1: it verifies with only the account's root public key, not with
 * another account's, and fails after any single changed character.
 */
import t from 'tap';
import { onboard, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { canonicalize, tryCanonicalize } from '../../../src/canonical.js';
import { verifyCertificate } from '../../../src/certificate.js';
import { createVerifier, publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { CONSTRAINTS, email } from './fixtures/delegations.js';

t.test('delegations: offline certificate verification', async (t) => {
  const sc = await startSidecar({}, { startWorkers: false });
  t.teardown(() => sc.close());

  t.test('a certificate verifies offline with only the root public key, and fails after any changed character', async (t) => {
    const exp = new Date(sc.clock.now() + 86_400_000).toISOString();
    const f = await specFlow(sc, email('offline'), { scopes: ['data:read', 'payments:send', 'custom:crm:contacts'], approve: ['payments:send', 'data:read', 'custom:crm:contacts'], constraints: CONSTRAINTS, expiresAt: exp });
    const id = await f.user.get('/v1/service/identity');
    t.equal(id.status, 200);
    const rootKey = publicKeyFromJson(id.body.root_public_key);
    t.ok(rootKey, 'root_public_key parses');
    const c = await f.user.get(`/v1/service/delegations/${f.certId}`);
    const cert = c.body.cert_json;
    const verifier = createVerifier(rootKey!);
    const ok = verifyCertificate(cert, rootKey!, sc.clock.now());
    t.equal(ok.ok, true, 'verifies with the root public key alone');
    if (ok.ok) t.equal(ok.expired, false);
    t.equal(verifyCertificate(cert, rootKey!, Date.parse(exp)).ok, true);
    const expired = verifyCertificate(cert, rootKey!, Date.parse(exp));
    t.equal(expired.ok && expired.expired, true, 'expired at expires_at');
    t.equal(cert.payload.cert_id, f.certId);
    t.same(cert.payload.scopes, ['custom:crm:contacts', 'data:read', 'payments:send']);
    t.same(cert.payload.constraints, CONSTRAINTS);
    t.equal(cert.payload.expires_at, exp);
    t.equal(cert.payload.connection_id, f.reg.connection_id);
    t.equal(cert.payload.subject.agent_id, f.agentId);
    const agents = (await f.user.get('/v1/service/agents')).body.agents;
    t.same(cert.payload.subject.public_key, agents[0].public_key_json, 'subject key = the agent key');
    t.same(cert.payload.issuer.public_key, id.body.root_public_key, 'issuer key = the root key');

    // Another account's root key does not verify it.
    const other = await onboard(sc, email('offline-other'));
    const otherKey = publicKeyFromJson((await other.get('/v1/service/identity')).body.root_public_key)!;
    t.same(verifyCertificate(cert, otherKey), { ok: false, reason: 'wrong_issuer' });
    const swapped = JSON.parse(JSON.stringify(cert));
    swapped.payload.issuer.public_key = (await other.get('/v1/service/identity')).body.root_public_key;
    t.equal(verifyCertificate(swapped, otherKey).ok, false, 'swapping in another issuer key breaks the signature');

    // Every single-character change.
    const text = canonicalize(cert);
    t.equal(JSON.stringify(JSON.parse(text)), text, 'the canonical text has no whitespace');
    const mlSig = cert.signature.ml_dsa_65 as string;
    const mlStart = text.indexOf(mlSig);
    t.ok(mlStart > 0);
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const other1 = (ch: string): string => {
      const i = B64.indexOf(ch);
      if (i >= 0) return B64[(i + 1) % B64.length]!;
      return ch === 'a' ? 'b' : 'a';
    };
    const other2 = (ch: string): string => String.fromCharCode(ch.charCodeAt(0) ^ 1);
    const positions: number[] = [];
    for (let i = 0; i < text.length; i++) {
      const inMl = i >= mlStart && i < mlStart + mlSig.length;
      // The ML-DSA-65 signature half costs ~4 ms per check: take its first and last 64 characters and every 11th between.
      if (!inMl || i - mlStart < 64 || mlStart + mlSig.length - i <= 64 || (i - mlStart) % 11 === 0) positions.push(i);
    }
    const payloadEnd = text.indexOf('"signature":');
    let checked = 0;
    let unparsable = 0;
    let equivalent = 0;
    let accepted = 0;
    const failures: string[] = [];
    const deadline = Date.now() + 25_000;
    for (const i of positions) {
      if (Date.now() > deadline) break;
      const ch = text[i]!;
      const variants = i < payloadEnd ? [other1(ch), other2(ch)] : [other1(ch)];
      for (const rep of new Set(variants)) {
        if (rep === ch) continue;
        const mutated = text.slice(0, i) + rep + text.slice(i + 1);
        let parsed: unknown;
        try { parsed = JSON.parse(mutated); } catch { unparsable++; continue; }
        if (tryCanonicalize(parsed) === text) { equivalent++; continue; }
        checked++;
        if (verifyCertificate(parsed, verifier).ok) {
          accepted++;
          if (failures.length < 5) failures.push(`position ${i} ${JSON.stringify(ch)}→${JSON.stringify(rep)}: ${text.slice(Math.max(0, i - 30), i + 30)}`);
        }
      }
    }
    t.equal(accepted, 0, `no changed certificate verifies${failures.length ? `: ${failures.join(' | ')}` : ''}`);
    t.equal(equivalent, 0, 'no single-character change gives an equivalent value');
    t.ok(Date.now() <= deadline, 'finished within the time bound');
    t.ok(checked >= 5_000, `checked ${checked} parsed variants (${unparsable} did not parse) over ${positions.length} of ${text.length} positions`);
    // Coverage of the parts that matter.
    for (const part of [f.certId, cert.payload.request_id, f.reg.connection_id, f.agentId, cert.payload.issued_at, exp, 'payments:send', 'custom:crm:contacts', '"50.00"', '"10.0.0.0/8"', '"08:00"', cert.signature.ed25519]) {
      const at = text.indexOf(part);
      t.ok(at >= 0 && positions.includes(at) && positions.includes(at + part.length - 1), `every position of ${part.slice(0, 24)} is checked`);
    }
    t.ok(positions.filter((i) => i >= mlStart && i < mlStart + mlSig.length).length >= 400, 'at least 400 positions of the ML-DSA signature half');
  });
});
