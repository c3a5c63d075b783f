import { describe, expect, it } from 'vitest';
import { extensionOf, hasSignature, signatureMatches, stemOf } from './signatures.js';
import { judgeMassChange, thresholdFor } from './detect.js';
import type { MassChangeStats } from '../repo/types.js';

const stats = (s: Partial<MassChangeStats>): MassChangeStats => ({
  filesBefore: 1000,
  filesModified: 0,
  filesAdded: 0,
  filesRemoved: 0,
  rewrittenWhole: 0,
  newBytes: 0,
  newStored: 0,
  compressibilityKnown: true,
  collapsed: 0,
  signatureLost: 0,
  renamed: 0,
  renamedOpaque: 0,
  replacedOpaque: 0,
  notAnalysed: 0,
  ...s,
});

describe('file-type signatures', () => {
  it('tell a file of its type from one that is not, and know when they cannot tell', () => {
    expect(signatureMatches('Report.DOCX', Buffer.from('PK\x03\x04rest', 'latin1'))).toBe(true);
    expect(signatureMatches('report.docx', Buffer.from([0x8f, 0x12, 0x00, 0x44]))).toBe(false);
    expect(signatureMatches('IMG_1.jpg', Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe(true);
    expect(signatureMatches('clip.mp4', Buffer.from('\0\0\0\x20ftypisom', 'latin1'))).toBe(true);
    expect(signatureMatches('clip.mp4', Buffer.from('\0\0\0\x20ftyp', 'latin1').subarray(0, 6))).toBe(false);
    expect(signatureMatches('notes.txt', Buffer.from('hello'))).toBeUndefined(); // no signature to check
    expect(signatureMatches('a.pdf', Buffer.alloc(0))).toBeUndefined(); // an empty file says nothing
    expect(hasSignature('x.xlsx') && !hasSignature('x.locked') && !hasSignature('.bashrc')).toBe(true);
    expect([extensionOf('a.tar.GZ'), extensionOf('.bashrc'), extensionOf('README')]).toEqual(['gz', '', '']);
    expect([stemOf('a.docx.locked'), stemOf('notes')]).toEqual(['a.docx', 'notes']);
  });
});

describe('the mass-change verdict', () => {
  it('needs 10 suspicious files and 0.5% of the files before', () => {
    expect([thresholdFor(0), thresholdFor(1755), thresholdFor(2001), thresholdFor(100_000)]).toEqual([
      10, 10, 11, 500,
    ]);
    expect(judgeMassChange(stats({ signatureLost: 9 }), []).suspect).toBe(false);
    const v = judgeMassChange(
      stats({ signatureLost: 6, collapsed: 2, renamedOpaque: 1, replacedOpaque: 1 }),
      [],
    );
    expect(v).toMatchObject({ suspect: true, suspicious: 10, threshold: 10 });
    expect(v.reasons[0]).toBe('10 files (1% of 1,000) changed the way encryption changes files');
    // renamed files that kept their data are no evidence; nor are rewrites without it
    expect(
      judgeMassChange(stats({ renamed: 400, rewrittenWhole: 900, filesModified: 900 }), []).suspect,
    ).toBe(false);
  });

  it('says how the new data compressed next to the previous run, and what the journal saw', () => {
    const prev = stats({ newBytes: 1000, newStored: 400, journal: { dirtyDirs: 3, perHour: 0.5 } });
    const v = judgeMassChange(
      stats({ newBytes: 1000, newStored: 995, filesModified: 5, journal: { dirtyDirs: 90, perHour: 45 } }),
      [],
      prev,
    );
    expect(v.reasons).toContain(
      'new data stored in 100% of its size (the previous run: 40%): it does not compress',
    );
    expect(v.reasons).toContain(
      'the change journal reported 90 changed folders (45 per hour; the previous run 0.5)',
    );
  });
});
