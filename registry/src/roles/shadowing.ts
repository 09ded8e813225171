/**
 * How a virtual index reads its members, for every ecosystem: members in their declared order,
 * private ones (hosted, or a nested virtual) asked first; a name a hosted member holds shadows
 * every cached member's, so a private name is never looked up upstream (dependency confusion).
 */
import type { IndexConfig } from '../config/types.js';

/** A cached member reads through an upstream; every other role is private. */
export function isUpstream(index: Pick<IndexConfig, 'role'>): boolean {
  return index.role === 'cached';
}

/** `members` in lookup order: private ones first, then the upstream caches, each in declared order. */
export function privateFirst<M>(members: readonly M[], indexOf: (m: M) => Pick<IndexConfig, 'role'>): M[] {
  return [...members.filter((m) => !isUpstream(indexOf(m))), ...members.filter((m) => isUpstream(indexOf(m)))];
}

/**
 * What each member answers for one name, after shadowing, in declared member order. `ask` reads a
 * group of members (private ones, then, unless shadowed, upstream ones); `hosted` tells an answer
 * that holds the name in a hosted index. When any does, only those answers count.
 */
export async function shadowedAnswers<M, A>(
  members: readonly M[],
  indexOf: (m: M) => Pick<IndexConfig, 'role'>,
  ask: (group: readonly M[]) => Promise<A[]>,
  memberOf: (answer: A) => M,
  hosted: (answer: A) => boolean,
): Promise<A[]> {
  const privateAnswers = await ask(members.filter((m) => !isUpstream(indexOf(m))));
  const shadowing = privateAnswers.filter(hosted);
  if (shadowing.length > 0) return shadowing;
  const all = [...privateAnswers, ...(await ask(members.filter((m) => isUpstream(indexOf(m)))))];
  return members.flatMap((m) => all.filter((a) => memberOf(a) === m));
}
