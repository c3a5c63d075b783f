// Source comments cite the design as "docs/architecture.md §N" (and the other docs by path): every such
// reference must resolve inside the repository — the file exists and, with a §N, has a "## N." heading —
// and nothing may still cite the design file that once lived outside it.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIRS = ['src', 'tests', 'bench', 'scripts', 'bin', 'native', '.ci', 'docs'];
const FILES = ['eslint.config.js', 'vitest.config.ts', 'electron.vite.config.ts', 'README.md'];
const SKIP = new Set(['node_modules', 'out', 'build', 'dist', 'screenshots', 'fixtures']);
const TEXT = /\.(ts|tsx|mjs|js|cc|h|md|sh|gyp)$|^run$/;

function* walk(dir: string): Generator<string> {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name)) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else if (TEXT.test(e.name)) yield p;
  }
}

function sources(): string[] {
  const out = FILES.map((f) => path.join(ROOT, f)).filter((f) => fs.existsSync(f));
  for (const d of DIRS) if (fs.existsSync(path.join(ROOT, d))) out.push(...walk(path.join(ROOT, d)));
  return out;
}

describe('documentation references', () => {
  it('every docs/<file>.md §N cited in the tree exists and has that section', () => {
    const problems: string[] = [];
    let count = 0;
    for (const file of sources()) {
      const text = fs.readFileSync(file, 'utf8');
      for (const m of text.matchAll(/(?<!['"`\w])docs\/([\w-]+\.md)(?:\s*§(\d+))?/g)) {
        count++;
        const target = path.join(ROOT, 'docs', m[1]);
        const where = `${path.relative(ROOT, file)}: ${m[0]}`;
        if (!fs.existsSync(target)) problems.push(`${where}: no such file`);
        else if (m[2] && !new RegExp(`^## ${m[2]}\\.`, 'm').test(fs.readFileSync(target, 'utf8')))
          problems.push(`${where}: no section ${m[2]}`);
      }
    }
    expect(problems).toEqual([]);
    expect(count).toBeGreaterThan(30); // the engine's headers cite the design: the scan must have found them
  });

  it('every source file a comment or a doc names exists', () => {
    // A file name with a path: one starting with a dot from the citing file's folder, others (say
    // pool/ledger.ts) from that folder or any above it, or from the usual roots (the engine, src/main,
    // the renderer, docs); a bare file name anywhere in the tree. Code is looked at only in its comments.
    const files = sources();
    const names = new Set(files.map((f) => path.basename(f)));
    const bases = ['src/main/engine', 'src/main', 'src/renderer/src', 'src', 'docs'].map((b) =>
      path.join(ROOT, b),
    );
    const ref =
      /(?<![\w@/.*<-])((?:\.{1,2}\/)*(?:[\w.-]+\/)*\w[\w.-]*\.(?:ts|tsx|mjs|cc|md|sh|gyp))(?![\w/-])/g;
    const comment = /(?:^\s*(?:\/\/|\/\*+|\*(?!\/))|\s\/\/\s|#\s)(.*)$/;
    const problems: string[] = [];
    let count = 0;
    for (const file of files) {
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      const prose = file.endsWith('.md') ? lines : lines.map((l) => comment.exec(l)?.[1] ?? '');
      prose.forEach((line, i) => {
        for (const m of line.matchAll(ref)) {
          const name = m[1];
          count++;
          const candidates: string[] = [];
          if (/^\.\.?\//.test(name)) candidates.push(path.resolve(path.dirname(file), name));
          else {
            for (let d = path.dirname(file); ; d = path.dirname(d)) {
              candidates.push(path.join(d, name));
              if (d === ROOT || d === path.dirname(d)) break;
            }
            candidates.push(...bases.map((b) => path.join(b, name)));
          }
          if (candidates.some((c) => fs.existsSync(c)) || (!name.includes('/') && names.has(name))) continue;
          problems.push(`${path.relative(ROOT, file)}:${i + 1}: ${name}`);
        }
      });
    }
    expect(problems).toEqual([]);
    expect(count).toBeGreaterThan(300); // the comments name hundreds of files: the scan must have found them
  });

  it('nothing cites the design file that lived outside the repository', () => {
    const stale = sources()
      .filter((f) => !f.endsWith(path.join('tests', 'docs', 'references.test.ts')))
      .filter((f) => /(?<![\w/])DESIGN\.md|shared\/DESIGN/.test(fs.readFileSync(f, 'utf8')))
      .map((f) => path.relative(ROOT, f));
    expect(stale).toEqual([]);
  });
});
