/**
 * Which images a PackageRegistry may run: the platform's choice, not the tenant's. Registry pods
 * mount the namespace's opted-in Secrets, so an image of the tenant's choosing could read them.
 * The operator's own image (the default of a registry without `spec.image`) is always allowed;
 * any other must match one of the platform's patterns (the chart value `registry.allowedImages`,
 * given to the operator as VELODEX_ALLOWED_IMAGES).
 *
 * A pattern is an image reference as written, where `*` stands for any run of characters except
 * `/`: `ghcr.io/acme/velodex:*` allows every tag of that repository, not `ghcr.io/acme/velodex/x`
 * nor `ghcr.io/acme/velodex-evil:1`. References are compared as written (no `docker.io/library/`
 * is added), so list each spelling a team should use.
 */
import type { PackageRegistry } from '../resources/types.js';

export interface ImagePolicy {
  /** The operator's own image: what a registry without `spec.image` runs. */
  defaultImage: string;
  /** Patterns of the other images a registry may name. */
  allowed: readonly string[];
}

/** `VELODEX_ALLOWED_IMAGES`: patterns separated by commas or white space (references have neither). */
export function parseAllowedImages(text: string | undefined): string[] {
  return (text ?? '').split(/[\s,]+/).filter((p) => p !== '');
}

export function imageAllowed(image: string, policy: ImagePolicy): boolean {
  return image === policy.defaultImage || policy.allowed.some((pattern) => globToRegExp(pattern).test(image));
}

function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^/]*');
  return new RegExp(`^${body}$`);
}

/** Why the registry may not run its `spec.image`, or null when it may. */
export function imageRefusal(registry: PackageRegistry, policy: ImagePolicy): { reason: 'ImageNotAllowed'; message: string } | null {
  const image = registry.spec.image;
  if (image === undefined || imageAllowed(image, policy)) return null;
  const allowed = policy.allowed.length > 0 ? `the allowed patterns are ${policy.allowed.map((p) => `"${p}"`).join(', ')}` : 'no other image is allowed';
  return {
    reason: 'ImageNotAllowed',
    message:
      `spec.image "${image}" is not an image this platform lets a registry run (besides the default ${policy.defaultImage}, ${allowed}): ` +
      'remove spec.image to run the default, or ask the platform team to add the image to the chart value registry.allowedImages',
  };
}
