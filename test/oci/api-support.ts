/** Plain-HTTP helpers for the `/v2/` API suites: pushes, digests and the error-body check. */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { oci, toml, type ConfigPart } from '../support/config.js';

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export function digestOf(data: Buffer | string): string {
  return `sha256:${sha256(data)}`;
}

/** Asserts the distribution-spec error shape: status, JSON type, `{errors: [{code, message}]}`. */
export async function expectOciError(res: Response, status: number, code: string): Promise<{ code: string; message: string }> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.headers.get('docker-distribution-api-version')).toBe('registry/2.0');
  const body = JSON.parse(text) as { errors: { code: string; message: string }[] };
  expect(Array.isArray(body.errors)).toBe(true);
  expect(body.errors).toHaveLength(1);
  const first = body.errors[0] as { code: string; message: string };
  expect(first.code).toBe(code);
  expect(typeof first.message).toBe('string');
  expect(first.message.length).toBeGreaterThan(0);
  return first;
}

export class Registry {
  constructor(
    readonly url: string,
    readonly auth: string,
  ) {}

  fetch(path: string, init: RequestInit & { authed?: boolean } = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (init.authed !== false && !headers.has('authorization')) headers.set('authorization', this.auth);
    return fetch(`${this.url}${path}`, { ...init, headers });
  }

  /** Monolithic `POST ?digest=`; returns the hex digest. */
  async pushBlob(name: string, data: Buffer | string): Promise<string> {
    const hex = sha256(data);
    const res = await this.fetch(`/v2/${name}/blobs/uploads/?digest=sha256:${hex}`, {
      method: 'POST',
      body: data,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(res.status, await res.text()).toBe(201);
    return hex;
  }

  async pushManifest(name: string, reference: string, body: string | Buffer, mediaType = OCI_MANIFEST): Promise<Response> {
    return this.fetch(`/v2/${name}/manifests/${reference}`, { method: 'PUT', body, headers: { 'content-type': mediaType } });
  }

  async openUpload(name: string): Promise<string> {
    const res = await this.fetch(`/v2/${name}/blobs/uploads/`, { method: 'POST' });
    expect(res.status).toBe(202);
    const location = res.headers.get('location');
    expect(location).toMatch(new RegExp(`^/v2/${name}/blobs/uploads/`));
    return location as string;
  }
}

/** A small image manifest whose config and layer are the given blobs. */
export function imageManifest(configHex: string, configSize: number, layers: { hex: string; size: number }[], extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${configHex}`, size: configSize },
    layers: layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${l.hex}`, size: l.size })),
    ...extra,
  });
}

/**
 * Two hosted OCI indexes of two teams with their own tokens (`token-a`, `token-b`), a virtual
 * index over both at `all/oci` (writes go to `allUploadTarget` when given), and one over team B
 * alone at `only-b/oci`.
 */
export function twoTeams(o: { allUploadTarget?: string } = {}): ConfigPart[] {
  return [
    oci.hosted('team-a', { route: 'team-a/oci', token: 'token-a' }),
    oci.hosted('team-b', { route: 'team-b/oci', token: 'token-b' }),
    oci.virtual('both', ['team-a', 'team-b'], { route: 'all/oci', uploadTarget: o.allUploadTarget }),
    oci.virtual('only-b', ['team-b'], { route: 'only-b/oci' }),
  ];
}

/** The config file of `twoTeams()`. */
export const TWO_TEAMS = toml(...twoTeams());
