// The platform-neutral USN record parser (used by the Windows backend) on synthetic record buffers:
// through the addon here, and the C++ unit-test binary (parser + coalescer) built with the host compiler.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadTrackerAddon } from '../../src/main/tracking/native.js';
import { repoRoot } from './helpers.js';

const USN_REASON_FILE_CREATE = 0x100;
const USN_REASON_RENAME_NEW_NAME = 0x2000;
const USN_REASON_CLOSE = 0x80000000;
const FILE_ATTRIBUTE_DIRECTORY = 0x10;

interface Rec {
  major: 2 | 3 | 4;
  file: bigint;
  fileHigh?: bigint;
  parent: bigint;
  usn: bigint;
  reason: number;
  attributes: number;
  name: string;
}

/** Lays a record out exactly as NTFS does (little-endian, 8-byte aligned). */
function record(r: Rec): Buffer {
  const fixed = r.major === 2 ? 60 : 76;
  const name = Buffer.from(r.name, 'utf16le');
  const len = (fixed + name.length + 7) & ~7;
  const b = Buffer.alloc(len);
  b.writeUInt32LE(len, 0);
  b.writeUInt16LE(r.major, 4);
  b.writeUInt16LE(0, 6);
  let q: number;
  if (r.major === 2) {
    b.writeBigUInt64LE(r.file, 8);
    b.writeBigUInt64LE(r.parent, 16);
    q = 24;
  } else {
    b.writeBigUInt64LE(r.file, 8);
    b.writeBigUInt64LE(r.fileHigh ?? 0n, 16);
    b.writeBigUInt64LE(r.parent, 24);
    b.writeBigUInt64LE(0n, 32);
    q = 40;
  }
  b.writeBigInt64LE(r.usn, q);
  b.writeBigInt64LE(133_000_000_000_000_000n, q + 8);
  b.writeUInt32LE(r.reason >>> 0, q + 16);
  b.writeUInt32LE(0, q + 20);
  b.writeUInt32LE(0x101, q + 24);
  b.writeUInt32LE(r.attributes, q + 28);
  b.writeUInt16LE(name.length, q + 32);
  b.writeUInt16LE(fixed, q + 34);
  name.copy(b, fixed);
  return b;
}

function withHeader(nextUsn: bigint, ...recs: Buffer[]): Buffer {
  const h = Buffer.alloc(8);
  h.writeBigInt64LE(nextUsn);
  return Buffer.concat([h, ...recs]);
}

const { addon, error } = loadTrackerAddon();

describe.skipIf(!addon && process.env.TIDEMARK_SKIP_NATIVE === '1')(
  `USN record parser via the addon${addon ? '' : ` (${error})`}`,
  () => {
    it('decodes V2 and V3 records, names in UTF-16 with surrogate pairs, and the next USN', () => {
      const buf = withHeader(
        9000n,
        record({
          major: 2,
          file: 0x5000000001234n,
          parent: 0x5000000000005n,
          usn: 4096n,
          reason: USN_REASON_FILE_CREATE | USN_REASON_CLOSE,
          attributes: 0x20,
          name: 'report.docx',
        }),
        record({
          major: 3,
          file: 77n,
          fileHigh: 0xabcn,
          parent: 5n,
          usn: 4200n,
          reason: USN_REASON_RENAME_NEW_NAME,
          attributes: FILE_ATTRIBUTE_DIRECTORY,
          name: 'Fotos 😀 été',
        }),
      );
      const r = addon!.parseUsnRecords(buf, true);
      expect(r.error).toBeUndefined();
      expect(r.nextUsn).toBe(9000n);
      expect(r.records).toHaveLength(2);
      expect(r.records[0]).toMatchObject({
        majorVersion: 2,
        fileRef: '00000000000000000005000000001234',
        parentRef: '00000000000000000005000000000005',
        usn: 4096n,
        reason: (USN_REASON_FILE_CREATE | USN_REASON_CLOSE) >>> 0,
        isDirectory: false,
        securityId: 0x101,
        name: 'report.docx',
      });
      expect(r.records[1]).toMatchObject({
        majorVersion: 3,
        fileRef: '0000000000000abc000000000000004d',
        isDirectory: true,
        name: 'Fotos 😀 été',
      });
    });

    it('skips record versions it does not decode and stops at zero padding', () => {
      const v4 = record({ major: 2, file: 1n, parent: 2n, usn: 3n, reason: 0, attributes: 0, name: 'x' });
      v4.writeUInt16LE(4, 4);
      const buf = withHeader(
        1n,
        v4,
        record({ major: 2, file: 9n, parent: 2n, usn: 4n, reason: 0, attributes: 0, name: 'y' }),
        Buffer.alloc(16),
      );
      const r = addon!.parseUsnRecords(buf, true);
      expect(r.skipped).toBe(1);
      expect(r.records.map((x) => x.name)).toEqual(['y']);
      expect(r.error).toBeUndefined();
    });

    it('rejects malformed buffers with a message, keeping the records before the bad one', () => {
      const good = record({ major: 2, file: 1n, parent: 2n, usn: 3n, reason: 0, attributes: 0, name: 'ok' });
      const truncated = record({
        major: 3,
        file: 1n,
        parent: 2n,
        usn: 3n,
        reason: 0,
        attributes: 0,
        name: 'cut',
      }).subarray(0, 40);
      let r = addon!.parseUsnRecords(withHeader(1n, good, truncated), true);
      expect(r.records.map((x) => x.name)).toEqual(['ok']);
      expect(r.error).toMatch(/out of bounds|truncated/);
      const badName = record({
        major: 2,
        file: 1n,
        parent: 2n,
        usn: 3n,
        reason: 0,
        attributes: 0,
        name: 'n',
      });
      badName.writeUInt16LE(500, 58);
      r = addon!.parseUsnRecords(withHeader(1n, badName), true);
      expect(r.records).toHaveLength(0);
      expect(r.error).toMatch(/file name out of bounds/);
      expect(addon!.parseUsnRecords(Buffer.alloc(3), true).error).toMatch(/shorter than the 8-byte/);
      expect(() => addon!.parseUsnRecords('nope' as unknown as Buffer)).toThrow(TypeError);
    });
  },
);

const cxx = ['c++', 'g++', 'clang++'].find((c) => spawnSync(c, ['--version']).status === 0);
describe.skipIf(!cxx)(`native C++ unit tests${cxx ? '' : ' (skipped: no C++ compiler on PATH)'}`, () => {
  it('USN parser and coalescer pass their C++ unit tests', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-native-test-'));
    try {
      const exe = path.join(dir, 'common_test');
      const native = path.join(repoRoot, 'native');
      const build = spawnSync(
        cxx!,
        [
          '-std=c++17',
          '-Wall',
          '-Wextra',
          '-Werror',
          '-o',
          exe,
          'test/common_test.cc',
          'src/common/usn_record.cc',
          'src/common/coalescer.cc',
        ],
        { cwd: native, encoding: 'utf8' },
      );
      expect(build.stderr).toBe('');
      expect(build.status).toBe(0);
      const run = spawnSync(exe, { encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/all native unit tests passed/);
      expect(run.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
