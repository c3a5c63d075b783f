/**
 * File-type signatures ("magic bytes") by file-name extension. A file of a known type starts with its
 * type's signature whatever its content; encrypted content does not, so a changed `report.docx` that no
 * longer starts with "PK\x03\x04" was not saved by a word processor. Only types whose signature is fixed
 * and checkable from the first bytes are listed; anything else is "unknown" (never evidence).
 */

/** How many leading bytes of a file the checks below need. */
export const HEADER_BYTES = 16;

type Check = (h: Uint8Array) => boolean;

const at =
  (offset: number, ...sig: number[]): Check =>
  (h) =>
    h.length >= offset + sig.length && sig.every((b, i) => h[offset + i] === b);
const ascii = (offset: number, s: string): Check => at(offset, ...Buffer.from(s, 'latin1'));
const any =
  (...checks: Check[]): Check =>
  (h) =>
    checks.some((c) => c(h));

const zip = any(at(0, 0x50, 0x4b, 0x03, 0x04), at(0, 0x50, 0x4b, 0x05, 0x06), at(0, 0x50, 0x4b, 0x07, 0x08));
const jpeg = at(0, 0xff, 0xd8, 0xff);
const png = at(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
const gif = any(ascii(0, 'GIF87a'), ascii(0, 'GIF89a'));
const pdf = ascii(0, '%PDF-');
const ftyp = ascii(4, 'ftyp'); // ISO base media: mp4, mov, m4a, heic, avif, 3gp
const riff = (kind: string) => (h: Uint8Array) => ascii(0, 'RIFF')(h) && ascii(8, kind)(h);
const ole = at(0, 0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1); // old Office (doc, xls, ppt, msg)
const tiff = any(at(0, 0x49, 0x49, 0x2a, 0x00), at(0, 0x4d, 0x4d, 0x00, 0x2a));
const mp3 = any(ascii(0, 'ID3'), at(0, 0xff, 0xfb), at(0, 0xff, 0xf3), at(0, 0xff, 0xf2), at(0, 0xff, 0xfa));
const gz = at(0, 0x1f, 0x8b);
const sqlite = ascii(0, 'SQLite format 3\0');

const BY_EXTENSION: Record<string, Check> = {
  // zip containers: Office Open XML, OpenDocument, e-books, archives, Java, Android
  zip,
  docx: zip,
  xlsx: zip,
  pptx: zip,
  docm: zip,
  xlsm: zip,
  odt: zip,
  ods: zip,
  odp: zip,
  epub: zip,
  jar: zip,
  apk: zip,
  kmz: zip,
  // images
  jpg: jpeg,
  jpeg: jpeg,
  png,
  gif,
  webp: riff('WEBP'),
  bmp: ascii(0, 'BM'),
  tif: tiff,
  tiff,
  heic: ftyp,
  heif: ftyp,
  avif: ftyp,
  psd: ascii(0, '8BPS'),
  // documents
  pdf,
  doc: ole,
  xls: ole,
  ppt: ole,
  msg: ole,
  rtf: ascii(0, '{\\rtf'),
  // audio and video
  mp3,
  flac: ascii(0, 'fLaC'),
  ogg: ascii(0, 'OggS'),
  opus: ascii(0, 'OggS'),
  wav: riff('WAVE'),
  avi: riff('AVI '),
  mp4: ftyp,
  m4a: ftyp,
  m4v: ftyp,
  mov: ftyp,
  '3gp': ftyp,
  mkv: at(0, 0x1a, 0x45, 0xdf, 0xa3),
  webm: at(0, 0x1a, 0x45, 0xdf, 0xa3),
  // archives and databases
  gz,
  tgz: gz,
  bz2: ascii(0, 'BZh'),
  xz: at(0, 0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00),
  '7z': at(0, 0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c),
  rar: ascii(0, 'Rar!'),
  zst: at(0, 0x28, 0xb5, 0x2f, 0xfd),
  sqlite,
  sqlite3: sqlite,
  // executables
  exe: ascii(0, 'MZ'),
  dll: ascii(0, 'MZ'),
  so: ascii(0, '\x7fELF'),
};

/** The lower-case extension of a file name ("" when it has none; a leading dot is no extension). */
export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

/** The name without its last extension ("report.docx" → "report", "notes" → "notes"). */
export function stemOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(0, dot) : name;
}

/** Whether files named like this have a signature this module can check. */
export function hasSignature(name: string): boolean {
  return Object.hasOwn(BY_EXTENSION, extensionOf(name));
}

/**
 * Whether `header` (the file's first bytes) carries the signature its name's extension promises:
 * true or false, or undefined when the extension has no known signature (or the file is empty — an
 * empty file says nothing about its type).
 */
export function signatureMatches(name: string, header: Uint8Array): boolean | undefined {
  const ext = extensionOf(name);
  if (!Object.hasOwn(BY_EXTENSION, ext) || header.length === 0) return undefined;
  return BY_EXTENSION[ext](header);
}
