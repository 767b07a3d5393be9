/**
 * src/path.ts beyond the normalizer's own table (test/gateway-plugin/units.test.ts):
 * the folded reading of a normalized path (foldSegment, foldPath) that the
 * gateway's route table compares, and the dot-segment rule on folded text,
 * which refuses (for the gateway and the sidecar's path_prefixes alike) a
 * segment a lenient server reads as `.` or `..`.
 */
import t from 'tap';
import { ServiceError } from '../../src/errors.js';
import { foldPath, foldSegment, isNormalizedPath, mayFoldBeyondCase, normalizePath } from '../../src/path.js';

t.test('foldSegment: the lenient reading of one segment', async (t) => {
  const cases: Array<[string, string]> = [
    ['admin', 'admin'], ['ADMIN', 'admin'], ['admin.', 'admin'], ['admin..x', 'admin..x'], ['admin%20', 'admin'], ['admin%C2%A0', 'admin'],
    ['admin.%20.', 'admin'], ['%20admin', 'admin'], ['adm%C4%B1n', 'admin'], ['%EF%BD%81dmin', 'admin'], ['%F0%9D%90%9Admin', 'admin'],
    ['%E2%93%90dmin', 'admin'], ['%C3%A1dmin', 'admin'], ['ad%C2%ADmin', 'admin'], ['adm%E2%80%8Bin', 'admin'], ['%C4%B0', 'i'],
    ['stra%C3%9Fe', 'strasse'], ['%C5%BFtate', 'state'], ['caf%C3%A9', 'cafe'], ['a%3Ab', 'a:b'], ['%E6%97%A5', '\u65e5'], ['.well-known', '.well-known'],
    ['%20', ''], ['.%20.', ''],
  ];
  for (const [segment, want] of cases) t.equal(foldSegment(segment), want, segment);
});

t.test('foldPath: segments, merged slashes, the trailing slash kept', async (t) => {
  t.same(foldPath('/app/ADMIN./x'), ['app', 'admin', 'x']);
  t.same(foldPath('/app/%20/admin/'), ['app', 'admin', ''], 'a segment that folds to nothing is merged away; the trailing slash stays');
  t.same(foldPath('/'), ['']);
  t.same(foldPath('/a/%E2%80%8B'), ['a', ''], 'a last segment that folds to nothing reads as a trailing slash');
  t.ok(mayFoldBeyondCase('/a%20'));
  t.ok(mayFoldBeyondCase('/admin./x'));
  t.notOk(mayFoldBeyondCase('/v1/items/123'), 'plain paths skip the full fold (the ASCII case check covers them)');
});

t.test('a segment that reads as a dot segment once folded is ambiguous', async (t) => {
  for (const path of ['/a/.%20/b', '/a/%20./b', '/a/.%E2%80%8B./b', '/a/.%C2%A0', '/a/%C2%AD../b', '/a/..%E2%80%8B', '/a/.%CC%81/b']) {
    let code = 'none';
    try {
      normalizePath(path);
    } catch (err) {
      code = err instanceof ServiceError ? err.code : 'other';
    }
    t.equal(code, 'ambiguous_path', path);
    t.notOk(isNormalizedPath(path), `${path}: not a normalized path (so no path_prefixes constraint matches it)`);
  }
  for (const path of ['/a/.well-known', '/a/b.c', '/a/x.%20y', '/a/%20.x']) t.equal(normalizePath(path), path, `${path} stays valid`);
});
