/**
 * An account's export file (NDJSON from `GET /v1/service/audit/personal/export`)
 * as an {@link AuditSource} for the offline verifier. The layout is fixed: the
 * header, the checkpoint lines, the event lines in position order, the trailer
 * with the counts. A first pass checks the layout and keeps the header and the
 * checkpoints; the rows are streamed again when the verifier reads them, so a
 * large export is never held in memory. The header's `first_position` and
 * `last_position` come back as {@link ExportSource.range}: the verifier checks
 * the event lines against them, so lines cut from either end of the file are
 * found even where no checkpoint covers them (the header is not signed: this
 * catches a cut file, not someone who also rewrites the header).
 */
import fs from 'node:fs';
import readline from 'node:readline';
import type { AuditCheckpointRecord, AuditSource, ChainedAuditEvent } from '../store/types.js';
import { AuditSourceError } from '../store/errors.js';
import { CHECKPOINT_LINE, EVENT_LINE, EXPORT_HEADER, EXPORT_TRAILER, EXPORT_VERSION, parseCheckpointLine, parseEventLine } from './format.js';

/** An export file as a source, with the range of positions its header announces. */
export type ExportSource = AuditSource & { readonly range: { first: number | null; last: number | null } };

const position = (v: unknown): v is number | null => v === null || (Number.isSafeInteger(v) && (v as number) >= 1);

/** Every parsed line of the file with its line number. */
async function* lines(file: string): AsyncGenerator<{ n: number; value: Record<string, unknown> }> {
  const rl = readline.createInterface({ input: fs.createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  let n = 0;
  for await (const text of rl) {
    n++;
    if (text === '') continue;
    let value: unknown;
    try { value = JSON.parse(text); } catch { throw new AuditSourceError(`${file}:${n}: not JSON`); }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AuditSourceError(`${file}:${n}: not a JSON object`);
    yield { n, value: value as Record<string, unknown> };
  }
}

/** Opens an export file; throws {@link AuditSourceError} when it is unreadable or not laid out as an export. */
export async function openExportSource(file: string): Promise<ExportSource> {
  try { await fs.promises.access(file, fs.constants.R_OK); } catch (err) { throw new AuditSourceError(`${file}: cannot read: ${(err as Error).message}`); }
  let header: Record<string, unknown> | undefined;
  const checkpoints: AuditCheckpointRecord[] = [];
  let rows = 0;
  let trailer: Record<string, unknown> | undefined;
  for await (const { n, value } of lines(file)) {
    const where = `${file}:${n}`;
    if (trailer) throw new AuditSourceError(`${where}: a line after the trailer`);
    if (!header) {
      if (value.type !== EXPORT_HEADER || value.version !== EXPORT_VERSION || typeof value.account_id !== 'string' || !Array.isArray(value.service_keys)
        || !position(value.first_position) || !position(value.last_position) || (value.first_position === null) !== (value.last_position === null)) {
        throw new AuditSourceError(`${where}: not an audit export (the first line must be an ${EXPORT_HEADER} header of version ${EXPORT_VERSION})`);
      }
      header = value;
    } else if (value.type === CHECKPOINT_LINE) {
      if (rows > 0) throw new AuditSourceError(`${where}: a checkpoint line after the event lines`);
      const c = parseCheckpointLine(value);
      if (c?.accountId !== header.account_id) throw new AuditSourceError(`${where}: a checkpoint of another account than the header's`);
      if (!c) throw new AuditSourceError(`${where}: a malformed checkpoint line`);
      checkpoints.push(c);
    } else if (value.type === EVENT_LINE) {
      if (value.account_id !== header.account_id) throw new AuditSourceError(`${where}: an event of another account than the header's`);
      rows++;
    } else if (value.type === EXPORT_TRAILER) {
      trailer = value;
    } else {
      throw new AuditSourceError(`${where}: unknown line type ${JSON.stringify(value.type)}`);
    }
  }
  if (!header) throw new AuditSourceError(`${file}: empty`);
  if (!trailer) throw new AuditSourceError(`${file}: no ${EXPORT_TRAILER} trailer: the export is truncated`);
  if (trailer.events !== rows || trailer.checkpoints !== checkpoints.length) {
    throw new AuditSourceError(
      `${file}: the trailer counts ${String(trailer.events)} events and ${String(trailer.checkpoints)} checkpoints, `
      + `the file has ${rows} and ${checkpoints.length}`);
  }
  const accountId = header.account_id as string;
  const keys = (header.service_keys as unknown[]).flatMap((k) => {
    const o = k as { key_id?: unknown; public_key?: unknown };
    return typeof o?.key_id === 'string' && typeof o.public_key === 'object' && o.public_key !== null ? [
      { id: o.key_id, publicKey: JSON.stringify(o.public_key) }] : [];
  });
  return {
    range: { first: header.first_position as number | null, last: header.last_position as number | null },
    async serviceKeys() { return keys; },
    async accounts() { return [accountId]; },
    async head() { return null; },
    async checkpoints(id) { return checkpoints.filter((c) => c.accountId === id); },
    async *rows(id): AsyncIterable<ChainedAuditEvent> {
      for await (const { n, value } of lines(file)) {
        if (value.type !== EVENT_LINE) continue;
        const r = parseEventLine(value);
        if (!r) throw new AuditSourceError(`${file}:${n}: a malformed event line`);
        if (r.accountId === id) yield r;
      }
    },
    async unchained() { return { count: 0, firstId: null }; },
    async close() { /* nothing held open */ },
  };
}
