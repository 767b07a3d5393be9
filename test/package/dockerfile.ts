/**
 * Reading a Dockerfile for the replay in `docker.ts`: instructions and stages (line
 * continuations, comments, `FROM ... AS name`), shell-style words, and `.dockerignore`
 * matching with Docker's rules (patterns from the context root, `*`, `?`, `**`, `!`
 * exceptions, the last match wins, a path is excluded with its parent folder).
 */
import path from 'node:path';

/** One instruction: its keyword, its argument text and the Dockerfile line it starts on. */
export interface Instruction { op: string; args: string; line: number }
/** A stage: its name (or index), what it is FROM, and its instructions after FROM. */
export interface Stage { name: string; from: string; instructions: Instruction[] }

/** Parses a Dockerfile: line continuations, comments, `FROM ... AS name` stages. */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  let pending = '';
  let start = 0;
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const line = raw.trimEnd();
    if (pending === '' && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    if (pending !== '' && line.trimStart().startsWith('#')) return; // comments inside a continuation
    if (pending === '') start = i + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      return;
    }
    const logical = (pending + line).trim();
    pending = '';
    const m = /^([A-Za-z]+)\s+([\s\S]*)$/.exec(logical);
    if (!m) throw new Error(`Dockerfile line ${start}: cannot parse ${JSON.stringify(logical)}`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.replace(/\s+/g, ' ').trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`Dockerfile line ${start}: bad FROM ${args}`);
      stages.push({ name: f[2] ?? String(stages.length), from: f[1]!, instructions: [] });
      return;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`Dockerfile line ${start}: ${op} before FROM`);
    stage.instructions.push({ op, args, line: start });
  });
  return stages;
}

/** Splits a shell-form argument list on spaces, honouring double and single quotes. */
export function shellWords(text: string): string[] {
  const words: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) words.push(m[1] ?? m[2] ?? m[3]!);
  return words;
}

/** `.dockerignore` matching with Docker's rules (see the file header). */
export class DockerIgnore {
  readonly #rules: { negate: boolean; re: RegExp }[];

  constructor(text: string) {
    this.#rules = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')).map((l) => {
      const negate = l.startsWith('!');
      const pattern = path.posix.normalize((negate ? l.slice(1) : l).replace(/^\/+/, '')).replace(/\/+$/, '');
      let re = '';
      for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i]!;
        if (c === '*' && pattern[i + 1] === '*') {
          re += pattern[i + 2] === '/' ? '(?:.*/)?' : '.*';
          i += pattern[i + 2] === '/' ? 2 : 1;
        } else if (c === '*') re += '[^/]*';
        else if (c === '?') re += '[^/]';
        else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      }
      return { negate, re: new RegExp(`^${re}$`) };
    });
  }

  /** True when `rel` (a context-relative path) or one of its parent directories is excluded. */
  excludes(rel: string): boolean {
    const parts = rel.split('/');
    for (let n = 1; n <= parts.length; n++) {
      const prefix = parts.slice(0, n).join('/');
      let excluded = false;
      for (const rule of this.#rules) if (rule.re.test(prefix)) excluded = !rule.negate;
      if (excluded) return true;
    }
    return false;
  }
}
