/**
 * A Dockerfile replay for the Docker test (no Docker engine runs here): parses the Dockerfile
 * and builds each stage in a directory that stands for the container's root filesystem.
 *
 * - `FROM node:<major>-...`: an empty root and the Node of that major from this project's
 *   devDependencies (`node@24`) first on PATH, so npm, the install scripts, the build and the
 *   targets run on the image's Node. `FROM <stage>`: a copy of that stage's root and settings.
 * - `COPY`: exactly the named sources — from the build context (this project's directory,
 *   filtered by `.dockerignore` with Docker's rules: patterns from the context root, `*`, `?`,
 *   `**`, `!` exceptions, the last match wins) or, with `--from=<stage>`, from that stage's
 *   root — with Docker's rule that a directory's contents (not the directory) are copied.
 * - `RUN`: each `&&`-separated command runs with `sh` in the stage's working directory, with
 *   the stage's ENV, except: `apt-get ...` and `rm -rf /var/lib/apt/lists/*` only check that
 *   the tools the install names exist here (`python3`, `make`, `g++`); `mkdir -p` and `chown`
 *   of absolute container paths act inside the replayed root (ownership is recorded, not set:
 *   the replay runs as one user). npm runs offline from the cache `npm ci` filled
 *   (`npm_config_offline=true`), and better-sqlite3's install finds its binary as a local
 *   prebuild (`npm_config_better_sqlite3_local_prebuilds`) instead of downloading it: the
 *   binary built for the same Node ABI from the same locked version.
 * - `WORKDIR`, `ENV`, `USER`, `EXPOSE`, `VOLUME`, `HEALTHCHECK`, `ENTRYPOINT`, `CMD` are
 *   recorded; any other instruction, or a `RUN` command touching another absolute path, fails
 *   the replay (the replay must not guess).
 *
 * Files copied from another stage are hard links (the replay never changes them afterwards),
 * and a stage that adds no files (`FROM runtime AS gateway` with only settings) shares its
 * parent's root: the same files Docker's layers would give it, without copying them again.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DockerIgnore, shellWords } from './dockerfile.js';
import { selfCpu } from './helpers.js';
import type { Instruction, Stage } from './dockerfile.js';

export { DockerIgnore, parseDockerfile } from './dockerfile.js';
export type { Instruction, Stage } from './dockerfile.js';

/** The recorded state of a replayed stage. */
export interface StageState {
  name: string;
  /** The directory that stands for the container's `/`. */
  root: string;
  env: Record<string, string>;
  workdir: string;
  user: string;
  nodeMajor: number;
  entrypoint: string[];
  cmd: string[];
  expose: string[];
  volumes: string[];
  healthcheck: string[];
  /** `chown` calls recorded (container path → owner). */
  owners: Record<string, string>;
}

/** Settings of a replay. */
export interface ReplayOptions {
  /** The build context (the project directory). */
  context: string;
  /** Where stage roots are made. */
  workDir: string;
  /** Node binary by major version (the base image's Node). */
  nodeFor: (major: number) => string;
  /** The environment RUN commands start from (PATH, HOME, npm's cache settings). */
  baseEnv: NodeJS.ProcessEnv;
  /** Extra variables for RUN commands only (offline npm, the local prebuild). */
  runEnv: Record<string, string>;
  /** Stop after this stage. */
  until?: string;
  /** Stages already replayed (by name), used as they are instead of replaying them again. */
  given?: Map<string, StageState>;
  /** Progress lines. */
  log?: (s: string) => void;
}

function copyInto(src: string, dest: string, ignore: DockerIgnore | undefined, rel: string, link: boolean): void {
  const st = fs.lstatSync(src);
  if (st.isDirectory()) {
    fs.mkdirSync(dest, { recursive: true });
    for (const entry of fs.readdirSync(src)) {
      const r = rel === '' ? entry : `${rel}/${entry}`;
      if (ignore?.excludes(r)) continue;
      copyInto(path.join(src, entry), path.join(dest, entry), ignore, r, link);
    }
  } else {
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.rmSync(dest, { force: true });
    if (link && st.isFile()) fs.linkSync(src, dest);
    else fs.cpSync(src, dest, { verbatimSymlinks: true, preserveTimestamps: true });
  }
}

/** The sources a COPY names: plain paths, or `*` / `?` globs in the last segment. */
function expandSources(base: string, sources: string[]): string[] {
  const out: string[] = [];
  for (const s of sources) {
    const clean = s.replace(/^\.\//, '').replace(/\/+$/, '') || '.';
    if (!/[*?]/.test(clean)) {
      out.push(clean);
      continue;
    }
    const dir = path.posix.dirname(clean);
    const re = new RegExp(`^${path.posix.basename(clean).replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}$`);
    const names = fs.existsSync(path.join(base, dir)) ? fs.readdirSync(path.join(base, dir)).filter((n) => re.test(n)) : [];
    if (names.length === 0) throw new Error(`COPY ${s}: no source matches`);
    out.push(...names.map((n) => (dir === '.' ? n : `${dir}/${n}`)));
  }
  return out;
}

/** A container path inside the replayed root. */
export function inRoot(state: StageState, p: string): string {
  return path.join(state.root, path.posix.isAbsolute(p) ? p : path.posix.join(state.workdir, p));
}

function runShell(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const { NODE_OPTIONS: wanted, ...rest } = env;
    const child = spawn('env', ['-u', 'NODE_OPTIONS', ...(wanted ? [`NODE_OPTIONS=${wanted}`] : []), 'sh', '-c', command], {
      cwd, env: rest, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}

/** The tools an `apt-get install` names, as commands to look for. */
const APT_TOOLS: Record<string, string> = { python3: 'python3', make: 'make', 'g++': 'g++', gcc: 'gcc' };

async function runInstruction(state: StageState, ins: Instruction, o: ReplayOptions): Promise<void> {
  const commands = ins.args.split(/\s+&&\s+/);
  for (const command of commands) {
    const words = shellWords(command);
    if (words[0] === 'apt-get') {
      if (words[1] !== 'install') continue;
      for (const pkg of words.slice(2).filter((w) => !w.startsWith('-'))) {
        const tool = APT_TOOLS[pkg];
        if (tool === undefined) throw new Error(`line ${ins.line}: apt-get install ${pkg}: the replay knows no tool for this package`);
        if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`line ${ins.line}: ${tool} (apt-get install ${pkg}) is not installed here`);
      }
      continue;
    }
    if (command.trim() === 'rm -rf /var/lib/apt/lists/*') continue;
    if (words[0] === 'mkdir' && words[1] === '-p') {
      for (const p of words.slice(2)) fs.mkdirSync(inRoot(state, p), { recursive: true });
      continue;
    }
    if (words[0] === 'chown' && words.length >= 3) {
      for (const p of words.slice(2)) {
        if (!fs.existsSync(inRoot(state, p))) throw new Error(`line ${ins.line}: chown ${p}: no such path`);
        state.owners[p] = words[1]!;
      }
      continue;
    }
    if (/(^|\s)\/(?!app\b)[a-z]/.test(command)) throw new Error(`line ${ins.line}: the replay does not run commands on absolute paths: ${command}`);
    const env = { ...o.baseEnv, ...state.env, ...o.runEnv, PATH: `${path.dirname(o.nodeFor(state.nodeMajor))}${path.delimiter}${o.baseEnv.PATH ?? ''}` };
    const cwd = inRoot(state, state.workdir);
    const started = Date.now();
    const cpu = selfCpu();
    const r = await runShell(command, cwd, env);
    const took = `${((Date.now() - started) / 1000).toFixed(1)} s, ${(selfCpu() - cpu).toFixed(1)} s CPU`;
    o.log?.(`  RUN ${command.slice(0, 80)} (${took})`);
    if (r.code !== 0) throw new Error(`line ${ins.line}: RUN ${command} failed (exit ${r.code}):\n${r.out.slice(-3000)}`);
  }
}

function execForm(args: string, what: string): string[] {
  const value = JSON.parse(args) as unknown;
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new Error(`${what}: only the exec (JSON) form is replayed`);
  return value as string[];
}

async function applyInstruction(state: StageState, ins: Instruction, states: Map<string, StageState>, o: ReplayOptions, ignore: DockerIgnore): Promise<void> {
  switch (ins.op) {
    case 'RUN': return runInstruction(state, ins, o);
    case 'WORKDIR':
      state.workdir = path.posix.resolve(state.workdir, ins.args);
      fs.mkdirSync(inRoot(state, state.workdir), { recursive: true });
      return;
    case 'COPY': {
      const words = shellWords(ins.args);
      const flags = words.filter((w) => w.startsWith('--'));
      const rest = words.filter((w) => !w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
      const unknown = flags.filter((f) => !f.startsWith('--from=') && !f.startsWith('--chown='));
      if (unknown.length > 0 || rest.length < 2) throw new Error(`line ${ins.line}: COPY ${ins.args}: not replayed`);
      const dest = rest.at(-1)!;
      let base = o.context;
      if (from !== undefined) {
        const source = states.get(from);
        if (source === undefined) throw new Error(`line ${ins.line}: COPY --from=${from}: no such stage`);
        base = source.root;
      }
      const sources = from === undefined ? expandSources(base, rest.slice(0, -1)) : rest.slice(0, -1).map((s) => s.replace(/^\/+/, ''));
      const destIsDir = dest.endsWith('/') || sources.length > 1;
      for (const s of sources) {
        const src = path.join(base, s);
        if (from === undefined && ignore.excludes(s)) throw new Error(`line ${ins.line}: COPY ${s}: excluded by .dockerignore`);
        if (!fs.existsSync(src)) throw new Error(`line ${ins.line}: COPY ${s}: not found in ${from === undefined ? 'the build context' : `stage ${from}`}`);
        const isDir = fs.statSync(src).isDirectory();
        const target = isDir || !destIsDir ? inRoot(state, dest) : path.join(inRoot(state, dest), path.basename(s));
        copyInto(src, target, from === undefined ? ignore : undefined, from === undefined ? s : '', from !== undefined);
      }
      return;
    }
    case 'ENV':
      for (const w of shellWords(ins.args)) {
        const eq = w.indexOf('=');
        if (eq <= 0) throw new Error(`line ${ins.line}: ENV ${w}: only the KEY=value form is replayed`);
        state.env[w.slice(0, eq)] = w.slice(eq + 1);
      }
      return;
    case 'USER': state.user = ins.args; return;
    case 'EXPOSE': state.expose.push(...ins.args.split(' ')); return;
    case 'VOLUME': state.volumes.push(...ins.args.split(' ')); return;
    case 'HEALTHCHECK': state.healthcheck = execForm(ins.args.slice(ins.args.indexOf('CMD ') + 4), 'HEALTHCHECK'); return;
    case 'ENTRYPOINT': state.entrypoint = execForm(ins.args, 'ENTRYPOINT'); state.cmd = []; return;
    case 'CMD': state.cmd = execForm(ins.args, 'CMD'); return;
    default: throw new Error(`line ${ins.line}: ${ins.op} is not replayed`);
  }
}

/** Replays `stages` in order; resolves to each stage's final state. Throws naming the failing line. */
export async function replay(stages: Stage[], o: ReplayOptions): Promise<Map<string, StageState>> {
  const states = new Map<string, StageState>(o.given ?? []);
  const ignorePath = path.join(o.context, '.dockerignore');
  const ignore = new DockerIgnore(fs.existsSync(ignorePath) ? fs.readFileSync(ignorePath, 'utf8') : '');
  for (const stage of stages) {
    if (o.given?.has(stage.name)) continue;
    const parent = states.get(stage.from);
    const addsFiles = stage.instructions.some((i) => i.op === 'COPY' || i.op === 'RUN' || i.op === 'WORKDIR');
    const root = parent !== undefined && !addsFiles ? parent.root : fs.mkdtempSync(path.join(o.workDir, `stage-${stage.name}-`));
    let state: StageState;
    if (parent !== undefined) {
      if (root !== parent.root) fs.cpSync(parent.root, root, { recursive: true, verbatimSymlinks: true });
      state = { ...structuredClone({ ...parent, root: '' }), name: stage.name, root };
    } else {
      const m = /^node:(\d+)-/.exec(stage.from);
      if (!m) throw new Error(`stage ${stage.name}: FROM ${stage.from}: only node:<major>-* base images are replayed`);
      state = { name: stage.name, root, env: {}, workdir: '/', user: 'root', nodeMajor: Number(m[1]), entrypoint: [], cmd: [], expose: [], volumes: [], healthcheck: [], owners: {} };
    }
    o.log?.(`stage ${stage.name} (FROM ${stage.from})`);
    for (const ins of stage.instructions) await applyInstruction(state, ins, states, o, ignore);
    states.set(stage.name, state);
    if (stage.name === o.until) break;
  }
  return states;
}
