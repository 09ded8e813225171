/**
 * What a manifest is recorded as once it is stored, pushed or pulled through alike: its media
 * type, size and subject, and the descriptor the referrers API lists for it.
 */
import { isObject, OCI_INDEX, type CheckedManifest, type Json } from './manifest-check.js';
import type { Descriptor, ManifestRecord } from './meta.js';

/** The record of a checked manifest of `size` bytes whose sha256 is `hex`, stored at `now`. */
export function manifestRecord(checked: CheckedManifest, hex: string, size: number, now = new Date()): ManifestRecord {
  const { mediaType, doc, subject } = checked;
  const record: ManifestRecord = {
    mediaType,
    size,
    descriptor: describe(doc, mediaType, hex, size),
    pushedAt: now.toISOString(),
  };
  if (subject) record.subject = subject.hex;
  return record;
}

/** The referrers-API descriptor: `artifactType` falls back to the config media type for image manifests (image-spec). */
export function describe(doc: Json, mediaType: string, hex: string, size: number): Descriptor {
  const d: Descriptor = { mediaType, digest: `sha256:${hex}`, size };
  const config = isObject(doc.config) ? doc.config : undefined;
  if (typeof doc.artifactType === 'string' && doc.artifactType !== '') d.artifactType = doc.artifactType;
  else if (mediaType !== OCI_INDEX && typeof config?.mediaType === 'string') d.artifactType = config.mediaType;
  const annotations = stringMap(doc.annotations);
  if (annotations) d.annotations = annotations;
  return d;
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return Object.keys(out).length > 0 ? out : undefined;
}
