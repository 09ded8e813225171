/**
 * The `scope` of the docker token protocol: `type[(class)]:name:action[,action...]`, e.g.
 * `repository:team/app:pull,push`. A name may itself hold a colon (a registry host with a port),
 * so the type ends at the first colon and the actions begin after the last one. Several scopes
 * come as repeated `scope` parameters, or space-separated in one (the OAuth2 form).
 */
export interface Access {
  type: string;
  name: string;
  actions: string[];
}

export class ScopeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScopeError';
  }
}

const TYPE = /^[a-z0-9]+(?:\([a-z0-9]+\))?$/;
const ACTION = /^(?:[a-z]+|\*)$/;
/** Longer than any name the grammar allows (255) with room for a host; bounds the work per scope. */
const MAX_SCOPE_LENGTH = 1024;

/** Parses one scope; a malformed one is a `ScopeError` whose message says what is wrong. */
export function parseScope(text: string): Access {
  if (text.length > MAX_SCOPE_LENGTH) throw new ScopeError(`scope is ${text.length} characters long; at most ${MAX_SCOPE_LENGTH} are allowed`);
  const first = text.indexOf(':');
  const last = text.lastIndexOf(':');
  if (first === -1 || first === last) throw new ScopeError(`scope "${text}" is not type:name:actions (e.g. repository:team/app:pull,push)`);
  const type = text.slice(0, first);
  const name = text.slice(first + 1, last);
  const actions = text.slice(last + 1).split(',');
  if (!TYPE.test(type)) throw new ScopeError(`scope "${text}" has an invalid resource type "${type}"`);
  if (name === '' || /\s/.test(name)) throw new ScopeError(`scope "${text}" names no resource`);
  if (!actions.every((a) => ACTION.test(a))) throw new ScopeError(`scope "${text}" has an invalid action list`);
  return { type, name, actions: [...new Set(actions)] };
}

/** Every scope of a request: each `scope` parameter, split on white space. */
export function parseScopes(params: readonly string[]): Access[] {
  return params.flatMap((p) => p.split(/\s+/).filter((s) => s !== '')).map(parseScope);
}

export function formatScope(access: Access): string {
  return `${access.type}:${access.name}:${access.actions.join(',')}`;
}
