import { describe, expect, it } from 'vitest';
import { privateFirst, shadowedAnswers } from '../../registry/src/roles/shadowing.js';

/** The neutral member rule both ecosystems' virtual indexes read by (roles/shadowing.ts). */
describe('member shadowing', () => {
  type Member = { name: string; role: 'hosted' | 'cached' | 'virtual' };
  const members: Member[] = [
    { name: 'mirror', role: 'cached' },
    { name: 'private', role: 'hosted' },
    { name: 'nested', role: 'virtual' },
    { name: 'mirror2', role: 'cached' },
  ];
  const self = (m: Member) => m;

  it('orders private members first, each group in declared order', () => {
    expect(privateFirst(members, self).map((m) => m.name)).toEqual(['private', 'nested', 'mirror', 'mirror2']);
  });

  /** Each member's answer for a name: who has it, and whether it holds it in a hosted index. */
  function asker(has: Record<string, boolean>, asked: string[][]) {
    return async (group: readonly Member[]) => {
      asked.push(group.map((m) => m.name));
      return group.filter((m) => m.name in has).map((m) => ({ member: m, hosted: has[m.name]! }));
    };
  }

  it('lets a hosted answer shadow every cached one, which are then never asked', async () => {
    const asked: string[][] = [];
    const answers = await shadowedAnswers(members, self, asker({ private: true, mirror: false }, asked), (a) => a.member, (a) => a.hosted);
    expect(answers.map((a) => a.member.name)).toEqual(['private']);
    expect(asked).toEqual([['private', 'nested']]);
  });

  it('without a hosted answer, keeps every answer in declared member order', async () => {
    const asked: string[][] = [];
    const answers = await shadowedAnswers(members, self, asker({ nested: false, mirror: false, mirror2: false }, asked), (a) => a.member, (a) => a.hosted);
    expect(answers.map((a) => a.member.name)).toEqual(['mirror', 'nested', 'mirror2']);
    expect(asked).toEqual([['private', 'nested'], ['mirror', 'mirror2']]);
  });
});
