/**
 * The usage ledger's journal at its limits (lifecycle/usage/ledger.ts): past 5,000 changes during
 * one count it is dropped and the count stands alone; a journal whose count never recorded (its
 * process killed) is abandoned after a day, and flushes stop writing to it.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CountReads } from '../../registry/src/lifecycle/usage/count.js';
import { UsageLedger, USAGE_KEY, type UsageDoc } from '../../registry/src/lifecycle/usage/ledger.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/velodex.js';

const hex = (i: number) => createHash('sha256').update(String(i)).digest('hex');

async function world(now: () => number) {
  const root = tempDir('velodex-ledger-');
  const blobs = new FsBlobStore(root);
  const meta = new FsMetaStore(root);
  await blobs.init();
  await meta.init();
  return { meta, ledger: new UsageLedger({ meta, blobs, indexOf: (h) => h, now }) };
}

describe('the usage journal', () => {
  it('past its limit is dropped: the recount is the count alone', async () => {
    let t = 1_000_000;
    const { meta, ledger } = await world(() => (t += 1));
    await ledger.beginCount();
    for (let i = 0; i < 5_001; i++) ledger.changed(hex(i), [], ['t.a'], 10);
    await ledger.flush();
    expect((await meta.get<UsageDoc>(USAGE_KEY))?.doc.journal?.overflow).toBe(true);
    expect(ledger.usage('t.a')).toEqual({ bytes: 50_010, objects: 5_001 });
    await ledger.recount({ indexes: { 't.a': { bytes: 7, objects: 1 } }, total: { bytes: 7, objects: 1 } }, new CountReads());
    expect(ledger.usage('t.a')).toEqual({ bytes: 7, objects: 1 });
    expect((await meta.get<UsageDoc>(USAGE_KEY))?.doc.journal).toBeUndefined();
  });

  it('of a count that never recorded is abandoned after a day', async () => {
    let t = 1_000_000;
    const { meta, ledger } = await world(() => t);
    await ledger.beginCount();
    ledger.changed(hex(1), [], ['t.a'], 10);
    await ledger.flush();
    // The index's change and the total's.
    expect((await meta.get<UsageDoc>(USAGE_KEY))?.doc.journal?.entries).toHaveLength(2);
    t += 25 * 3600_000;
    ledger.changed(hex(2), [], ['t.a'], 10);
    await ledger.flush();
    const doc = (await meta.get<UsageDoc>(USAGE_KEY))?.doc;
    expect(doc?.journal).toBeUndefined();
    expect(doc?.indexes['t.a']).toEqual({ bytes: 20, objects: 2 });
  });
});
