/**
 * One certificate's page (`/certificates/{cert_id}`): what it grants, where it
 * sits in a chain (its parent, its depth, its right to delegate), and the tree
 * of certificates sub-delegated below it (docs/certificates.md,
 * "Sub-delegation"), read level by level from
 * `GET /v1/service/delegations/{cert_id}/children` — each level's list in the
 * API's order, at most {@link TREE_MAX_DEPTH} levels and
 * {@link TREE_MAX_NODES} certificates. Every node shows its agent, scopes and
 * status, and (when the session's role may revoke) a Revoke button: the API
 * revokes the node and everything below it in one transaction, and the page
 * reads the tree again. The tree is nested lists, so a screen reader says
 * each node's level.
 */
import type { JSX } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { Link } from '../router.js';
import type { Route } from '../router.js';
import { allows } from '../session.js';
import { TREE_MAX_DEPTH, TREE_MAX_NODES } from '../constants.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { plural, shortId, when } from '../ui/format.js';
import type { Agent, Certificate, Revocation } from '../types.js';
import { isActive } from '../types.js';
import { describeConstraints } from '../constraints/kinds.js';

/** A certificate of the tree and the certificates sub-delegated directly under it. */
export interface TreeNode {
  cert: Certificate;
  children: TreeNode[];
  /** Its children were not read: the tree's depth or size bound was reached first. */
  unread: boolean;
}

/** How many children reads run at once. */
const PARALLEL_READS = 6;

const childrenOf = (id: string): Promise<{ certificates: Certificate[] }> =>
  api('GET', `/v1/service/delegations/${encodeURIComponent(id)}/children`);

/** Reads the tree below `root` breadth first, within the bounds; `truncated` when a bound cut it short. */
export async function readTree(root: Certificate): Promise<{ tree: TreeNode; size: number; truncated: boolean }> {
  const tree: TreeNode = { cert: root, children: [], unread: false };
  let level = [tree];
  let size = 1;
  let truncated = false;
  for (let depth = 1; level.length > 0; depth++) {
    if (depth > TREE_MAX_DEPTH || size >= TREE_MAX_NODES) {
      for (const n of level) n.unread = true;
      truncated = true;
      break;
    }
    const next: TreeNode[] = [];
    for (let i = 0; i < level.length; i += PARALLEL_READS) {
      const batch = level.slice(i, i + PARALLEL_READS);
      const lists = await Promise.all(batch.map((n) => childrenOf(n.cert.cert_id)));
      batch.forEach((n, j) => {
        for (const c of lists[j]!.certificates) {
          if (size >= TREE_MAX_NODES) { n.unread = true; truncated = true; break; }
          const child: TreeNode = { cert: c, children: [], unread: false };
          n.children.push(child);
          next.push(child);
          size++;
        }
      });
    }
    level = next;
  }
  return { tree, size, truncated };
}

/** A certificate's state in words. */
function stateWords(c: Certificate): JSX.Element {
  if (c.status === 'revoked') {
    const why = c.revoke_reason === 'ancestor_revoked' ? ' with a certificate above it'
      : c.revoke_reason ? ` — “${c.revoke_reason}”` : '';
    return <><span class="badge revoked">revoked</span> {when(c.revoked_at)}{why}</>;
  }
  if (!isActive(c)) return <><span class="badge expired">expired</span> {when(c.expires_at)}</>;
  const until = c.expires_at ? `until ${when(c.expires_at)}` : 'until revoked';
  return <><span class="badge approved">in force</span> {until}</>;
}

function Node(p: { node: TreeNode; pageId: string; agentName: (id: string) => string;
  onRevoke: ((c: Certificate) => void) | null }): JSX.Element {
  const { cert: c, children } = p.node;
  const agent = p.agentName(c.agent_id);
  return (
    <li data-cert={c.cert_id}>
      <div class="node">
        <span class="mono" title={c.cert_id}>{c.cert_id === p.pageId
          ? <strong>{shortId(c.cert_id)} (this certificate)</strong>
          : <Link href={`/certificates/${encodeURIComponent(c.cert_id)}`}>{shortId(c.cert_id)}</Link>}</span>
        <span class="agent">{agent}</span>
        <span class="scopes-list">{c.approved_scope.join(', ')}</span>
        <span class="state">{stateWords(c)}</span>
        {p.onRevoke && isActive(c) && <button type="button" class="danger" onClick={() => p.onRevoke!(c)}>Revoke<span
          class="sr-only"> {shortId(c.cert_id)} of {agent}</span>…</button>}
      </div>
      {children.length > 0 && (
        <ul aria-label={`Sub-delegated from ${shortId(c.cert_id)} (${agent})`}>
          {children.map((n) => <Node key={n.cert.cert_id} {...p} node={n} />)}
        </ul>
      )}
      {p.node.unread && <p class="hint">Certificates below this one are not shown (the page reads at
        most {TREE_MAX_DEPTH} levels and {TREE_MAX_NODES} certificates); <Link
        href={`/certificates/${encodeURIComponent(c.cert_id)}`}>open it</Link> to see them.</p>}
    </li>
  );
}

/** The certificate's page. */
export function CertificatePage(p: { route: Route }): JSX.Element {
  const { session } = useApp();
  const certId = decodeURIComponent(p.route.path.slice('/certificates/'.length));
  const d = useLoad(async () => {
    const [cert, a] = await Promise.all([
      api<Certificate>('GET', `/v1/service/delegations/${encodeURIComponent(certId)}`),
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
    ]);
    return { cert, agents: a.agents, ...await readTree(cert) };
  }, [certId]);
  const [target, setTarget] = useState<Certificate | null>(null);
  const [reason, setReason] = useState('');
  const [status, setStatus] = useState('');
  const treeHeading = useRef<HTMLHeadingElement>(null);
  const canRevoke = allows(session, 'delegations_decide');
  const agentName = (id: string): string => d.data?.agents.find((x) => x.agent_id === id)?.name ?? shortId(id);
  const c = d.data?.cert;
  const below = d.data ? d.data.size - 1 : 0;
  return (
    <section>
      <PageTitle>Certificate {shortId(certId)}</PageTitle>
      <p><Link href="/certificates">All certificates</Link></p>
      <ErrorText error={d.error} />
      {c && d.data && (
        <>
          <dl class="facts">
            <dt>Certificate</dt><dd class="mono">{c.cert_id}</dd>
            <dt>Agent</dt><dd>{agentName(c.agent_id)}</dd>
            <dt>Scopes</dt><dd>{c.approved_scope.join(', ')}</dd>
            <dt>Constraints</dt><dd>{describeConstraints(c.constraints)}</dd>
            <dt>Status</dt><dd>{stateWords(c)}</dd>
            <dt>Issued</dt><dd>{when(c.issued_at)}</dd>
            <dt>Place in the chain</dt>
            <dd>{c.parent_cert_id ? <>sub-delegated at depth {c.depth ?? '?'} from <Link
              href={`/certificates/${encodeURIComponent(c.parent_cert_id)}`}>{shortId(c.parent_cert_id)}</Link></>
              : 'approved by the account holder (a root)'}</dd>
            <dt>Right to delegate</dt>
            <dd>{c.max_delegation_depth ? `${plural(c.max_delegation_depth, 'level')} below it` : 'none'}</dd>
          </dl>
          <h2 tabIndex={-1} ref={treeHeading}>Sub-delegations</h2>
          <p>{below === 0 ? 'No agent has sub-delegated from this certificate.'
            : `${plural(below, 'certificate')} below this one${d.data.truncated ? ' (cut short, see below)' : ''}.`}
            {' '}Revoking a certificate revokes every certificate below it; the ones above it and beside it stay.</p>
          <ul class="tree" aria-label={`Delegation tree of ${shortId(c.cert_id)}`}>
            <Node node={d.data.tree} pageId={c.cert_id} agentName={agentName}
              onRevoke={canRevoke ? (x) => { setReason(''); setTarget(x); } : null} />
          </ul>
          {!canRevoke && <p class="hint">Your role ({session.workspace?.role}) may not revoke certificates.</p>}
        </>
      )}
      <StatusText>{status}</StatusText>
      <ConfirmDialog open={target !== null} title="Revoke this certificate?" confirmLabel="Revoke certificate" danger
        onClose={() => setTarget(null)} onClosed={() => treeHeading.current?.focus()}
        onConfirm={async () => {
          if (!reason.trim()) {
            throw new Error('Give a reason: it is recorded with the revocation and sent to the platform.');
          }
          const r = await api<Revocation>('POST',
            `/v1/service/delegations/${encodeURIComponent(target!.cert_id)}/revoke`, { reason: reason.trim() });
          const n = r.descendants_revoked.length;
          const with_ = n ? ` and ${plural(n, 'certificate')} below it` : '';
          setStatus(`Revoked ${shortId(r.cert_id)}${with_} at ${when(r.revoked_at)}. `
            + `Verify denies ${n ? 'their' : 'its'} proofs from now on.`);
          d.reload();
        }}>
        {target && <p>{agentName(target.agent_id)} loses <strong>{target.approved_scope.join(', ')}</strong> at
          once, and so does every agent that holds a certificate sub-delegated below it. This cannot be undone.</p>}
        <label for="revoke-reason">Reason (required)</label>
        <input id="revoke-reason" maxLength={500} value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
      </ConfirmDialog>
    </section>
  );
}
