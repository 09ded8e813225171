/**
 * `spec.gatewayRoute` as a Gateway API HTTPRoute: every path of its host to the registry's Service
 * port, attached to the Gateways it names. TLS is the Gateway listener's; the spec's `scheme` only
 * says what clients are told (render/registry-config.ts `externalUrl`).
 */
import type { PackageRegistry, RegistryGatewayRoute } from '../resources/types.js';
import { HTTP_ROUTE } from './extension-kinds.js';
import { owned, servicePort, type ApplyObject } from './objects.js';

const GATEWAY_GROUP = 'gateway.networking.k8s.io';

export function httpRoute(registry: PackageRegistry, route: RegistryGatewayRoute): ApplyObject {
  const name = registry.metadata.name;
  const base = owned(registry, HTTP_ROUTE.kind, HTTP_ROUTE.apiVersion, name);
  return {
    ...base,
    metadata: { ...base.metadata, ...(route.annotations ? { annotations: route.annotations } : {}) },
    spec: {
      parentRefs: route.parentRefs.map((p) => ({
        group: GATEWAY_GROUP,
        kind: 'Gateway',
        name: p.name,
        ...(p.namespace !== undefined ? { namespace: p.namespace } : {}),
        ...(p.sectionName !== undefined ? { sectionName: p.sectionName } : {}),
        ...(p.port !== undefined ? { port: p.port } : {}),
      })),
      hostnames: [route.host],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: [{ group: '', kind: 'Service', name, port: servicePort(registry) }] }],
    },
  };
}
