/**
 * Route resolution with folded spellings (route-table.ts): a path whose
 * folded reading (foldPath of src/path.ts) is routed differently from its
 * exact spelling is `ambiguous` (`fold`), also against pattern literals that
 * themselves fold (non-ASCII or percent-encoded literals); readings that stay
 * on the same authorization match as before.
 */
import t from 'tap';
import { compileRoutes } from '../../gateway-plugin/routes.js';

t.test('route resolution: folded spellings', async (t) => {
  const table = compileRoutes([
    { method: '*', path: '/app/*', public: true },
    { method: '*', path: '/app/admin/*', scope: 'admin:manage' },
    { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
    { method: 'GET', path: '/v1/items/:id/a:b', scope: 'data:write' },
  ], 'test:');
  const r = (p: string, m = 'GET'): string => {
    const res = table.resolve(m, p);
    return res.kind === 'match' ? `match ${res.route.pattern}` : res.kind === 'ambiguous' ? `ambiguous ${res.spelling}` : 'none';
  };
  for (const path of ['/app/admin./x', '/app/admin%20/x', '/app/admin%C2%A0/x', '/app/adm%C4%B1n/x', '/app/%EF%BD%81dmin/x', '/app/%C3%A1dmin/x',
    '/app/ad%C2%ADmin/x', '/app/%20/admin/x', '/app/admin./']) {
    t.equal(r(path), 'ambiguous fold', path);
  }
  t.equal(r('/app/ADMIN/x'), 'ambiguous case', 'plain ASCII case keeps its own answer');
  t.equal(r('/app/admin/x'), 'match /app/admin/*');
  t.equal(r('/app/admin/x.'), 'match /app/admin/*', 'a folded reading on the same route');
  t.equal(r('/app/caf%C3%A9/x'), 'match /app/*', 'non-ASCII that folds onto the same route');
  t.equal(r('/v1/items/%C3%A9'), 'match /v1/items/:id', 'folding inside a parameter is irrelevant');
  t.equal(r('/v1/items/1/a%3Ab'), 'ambiguous fold', 'an encoded ":" that servers decode onto a literal');
  t.equal(r('/v1/items/1/a:b'), 'match /v1/items/:id/a:b');
  const literal = compileRoutes([
    { method: 'GET', path: '/caf%C3%A9', scope: 'data:read' },
    { method: 'GET', path: '/*', public: true },
  ], 'test:');
  const lr = (p: string): string => {
    const res = literal.resolve('GET', p);
    return res.kind === 'match' ? `match ${res.route.pattern}` : res.kind === 'ambiguous' ? `ambiguous ${res.spelling}` : 'none';
  };
  t.equal(lr('/caf%C3%A9'), 'match /caf%C3%A9');
  t.equal(lr('/cafe'), 'ambiguous fold', 'an ASCII spelling of a non-ASCII literal');
  t.equal(lr('/cafe%CC%81'), 'ambiguous fold', 'the decomposed spelling (e + combining acute)');
  t.equal(lr('/other'), 'match /*');
});
