/** The one archive member-path check (Python uploads, archive inspection). */
import { describe, expect, it } from 'vitest';
import { unsafeMemberReason } from '../../registry/src/http/member-path.js';

describe('member names', () => {
  it('knows unsafe member names', () => {
    expect(unsafeMemberReason('a/b.py')).toBeNull();
    expect(unsafeMemberReason('/etc/passwd')).toBe('absolute path');
    expect(unsafeMemberReason('a/../../b')).toBe('parent-directory ("..") segment');
    expect(unsafeMemberReason('a\\b')).toBe('backslash in the name');
    expect(unsafeMemberReason('C:/x')).toBe('absolute path (drive letter)');
    expect(unsafeMemberReason('a\u0000b')).toBe('control character in the name');
  });
});
