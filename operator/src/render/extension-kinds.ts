/**
 * Kinds other projects define, which a cluster serves only where their CRDs are installed: the
 * Gateway API's HTTPRoute and cert-manager's Certificate. A registry's objects of these kinds are
 * applied only when the API server serves the kind, and never fail a reconcile when it does not
 * (reconcile/extension-objects.ts).
 */
export const HTTP_ROUTE = { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'HTTPRoute' } as const;
export const CERTIFICATE = { apiVersion: 'cert-manager.io/v1', kind: 'Certificate' } as const;
