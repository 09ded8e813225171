/** The `Location` of what a `/v2/` write created: a blob, a manifest, an upload session. */

export function blobLocation(name: string, hex: string): string {
  return `/v2/${name}/blobs/sha256:${hex}`;
}

export function manifestLocation(name: string, hex: string): string {
  return `/v2/${name}/manifests/sha256:${hex}`;
}

export function uploadLocation(name: string, session: string): string {
  return `/v2/${name}/blobs/uploads/${session}`;
}
