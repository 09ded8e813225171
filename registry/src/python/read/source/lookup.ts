/**
 * Which project a distribution filename belongs to, without scanning the index: a wheel's name
 * is its first `-` field; an sdist's name is everything before the version, which (PEP 625)
 * follows the last `-`, with older spellings tried after it.
 */
import { isValidProjectName, normalizeName } from '../../model/records.js';

const MAX_CANDIDATES = 6;

export function candidateProjects(filename: string): string[] {
  const dashes: number[] = [];
  for (let i = filename.indexOf('-'); i > 0; i = filename.indexOf('-', i + 1)) dashes.push(i);
  if (dashes.length === 0) return [];
  const cuts = filename.endsWith('.whl') ? [dashes[0]!] : dashes.reverse();
  const names = cuts.map((i) => normalizeName(filename.slice(0, i))).filter(isValidProjectName);
  return [...new Set(names)].slice(0, MAX_CANDIDATES);
}
