// Prints the failures of a saved `npm test` log (TAP from tap 21): for each failing assertion or
// subtest, the test file it belongs to, its `not ok` line and its YAML diagnostic (at most 14
// lines each). CI shows only the end of a run's output, so `.ci/run` prints this after a failed
// run. When the log has no `not ok` line (the type check failed, or tap itself), it prints the
// log's last 80 lines instead.
import fs from 'node:fs';

const file = process.argv[2];
if (file === undefined) {
  console.error('usage: node scripts/ci-failures.mjs <log>');
  process.exit(2);
}
const lines = fs.readFileSync(file, 'utf8').split('\n');
let current = '(before the first test file)';
let shownFile = '';
let failures = 0;
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const top = /^# Subtest: (\S+)/.exec(line);
  if (top !== null) current = top[1];
  const failed = /^(\s*)not ok \d+ - /.exec(line);
  if (failed === null) continue;
  failures++;
  if (shownFile !== current) {
    console.log(`\n== ${current}`);
    shownFile = current;
  }
  console.log(line);
  const indent = failed[1].length;
  // The diagnostic follows, indented two more spaces, between `---` and `...`. A file's own line
  // (indent 0) says how its process ended (exit code, signal, a timeout): a file can fail with no
  // failing assertion, and that is then the only cause shown.
  if ((lines[i + 1] ?? '').trim() !== '---') continue;
  let shown = 0;
  for (let j = i + 1; j < lines.length; j++) {
    const next = lines[j];
    const depth = next.length - next.trimStart().length;
    if (next.trim() !== '' && depth <= indent) break;
    if (shown++ < 14) console.log(next);
    if (next.trim() === '...') break;
  }
}
if (failures === 0) {
  console.log('(no `not ok` line; the end of the log:)');
  console.log(lines.slice(-80).join('\n'));
}
// A test file whose setup throws at top level (an `await` outside any test) exits 1 with no TAP
// at all; Node printed its error to the inherited stderr, somewhere in the middle of the log.
// Show such errors (a line that starts with `Error` or `SomethingError:` at column 0, and the
// stack lines after it), at most five.
let shownErrors = 0;
for (let i = 0; i < lines.length && shownErrors < 5; i++) {
  if (!/^[A-Za-z]*Error\b.*:/.test(lines[i])) continue;
  if (shownErrors++ === 0) console.log('\n== errors printed outside TAP (a test file\'s stderr):');
  console.log(lines.slice(Math.max(0, i - 4), i + 8).join('\n'));
  console.log('--');
}
