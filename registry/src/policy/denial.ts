/**
 * The spec's policy denial object and the error that carries it. Every ecosystem and every
 * action (upload, mirror, serve) refuses with this one shape, as 403: the error has no status of
 * its own (kind `policy_denied`); each ecosystem's table answers it with the denial object.
 */
import { NeutralError } from '../errors/neutral.js';

export type PolicyAction = 'upload' | 'mirror' | 'serve';

export interface PolicyDenial {
  action: PolicyAction;
  project: string;
  /** Present for file-level denials. */
  filename?: string;
  version?: string;
  /** The policy key that denied, e.g. `max-file-size`. */
  rule: string;
  /** The field of the matched value, e.g. `size`. */
  field: string;
  reason: string;
}

export class PolicyDenialError extends NeutralError {
  readonly kind = 'policy_denied';

  constructor(readonly denial: PolicyDenial) {
    super(denial.reason);
    this.name = 'PolicyDenialError';
  }
}
