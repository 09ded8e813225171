/**
 * `GET /v2/<name>/referrers/<digest>`: an image index of the descriptors of every manifest that
 * declared `<digest>` as its subject, across the index's members. No `artifactType` filter is
 * applied, so `OCI-Filters-Applied` is never sent.
 */
import { OCI_INDEX } from '../model/manifest-check.js';
import { parseDigest } from '../model/names.js';
import type { OciCall } from './exchange.js';

export async function listReferrers(call: OciCall, digest: string): Promise<void> {
  const { deps, target, reply } = call;
  const hex = parseDigest(digest);
  const manifests = await deps.members.referrers(target.index, target.repo, hex);
  // A Buffer, so fastify does not append "; charset=utf-8" to the exact media type clients compare.
  await reply.type(OCI_INDEX).send(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests })));
}
