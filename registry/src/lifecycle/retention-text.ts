/** A retention report as text, for the terminal (`velodex retention`). */
import { formatDuration } from '../config/duration.js';
import { countsOf, type RetentionReport } from './retention.js';

export function retentionText(report: RetentionReport): string {
  const lines: string[] = [];
  const would = report.dryRun;
  lines.push(would ? 'retention dry run: nothing was changed' : 'retention run');
  if (report.indexes.length === 0) lines.push('no index has retention rules (untagged_after, keep_tags)');
  for (const ix of report.indexes) {
    const c = countsOf(ix);
    const verb = would ? 'would delete' : 'deleted';
    lines.push(`index ${ix.index}: ${verb} ${c.deleted}, ${would ? 'would untag' : 'untagged'} ${c.untagged}${c.skipped > 0 ? `, skipped ${c.skipped}` : ''}`);
    for (const r of ix.repositories) {
      lines.push(`  ${r.repository}`);
      for (const u of r.untagged) lines.push(`    untag  ${u.tag} (${u.digest})  ${u.rule}`);
      for (const d of r.deleted) {
        const tags = d.tags.length > 0 ? ` [was ${d.tags.join(', ')}]` : '';
        lines.push(`    delete ${d.digest}${tags}  age ${formatDuration(d.ageSecs)}  ${d.rule}`);
      }
      for (const s of r.skipped ?? []) lines.push(`    skip   ${s.digest}${s.tag !== undefined ? ` (${s.tag})` : ''}: ${s.reason}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
