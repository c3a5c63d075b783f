/**
 * Loads one of the project's small native addons (native/<dir>/build/Release/<name>.node) wherever this
 * code runs from: the sources (src/main/engine/…), a bundle (out/cli, out/main) or the packaged app
 * (app.asar.unpacked). Returns undefined when the addon was not built: callers fall back to JavaScript.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import util from 'node:util';

export function loadNativeAddon<T>(dir: string, name: string): T | undefined {
  const require = createRequire(import.meta.url);
  const rel = path.join('native', dir, 'build', 'Release', `${name}.node`);
  const candidates: string[] = [];
  // the project root is a few folders above this file (sources) or above the bundle
  for (let d = path.dirname(fileURLToPath(import.meta.url)), i = 0; i < 5; d = path.dirname(d), i++)
    candidates.push(path.join(d, rel));
  if (process.resourcesPath) candidates.push(path.join(process.resourcesPath, 'app.asar.unpacked', rel));
  for (const candidate of candidates) {
    if (!existsSync(candidate)) continue;
    try {
      return require(candidate) as T;
    } catch {
      // built for another Node/Electron ABI: try the next, else fall back
    }
  }
  return undefined;
}

/** Whether the addons use an io_uring where Linux allows one (TIDEMARK_NO_URING=1: threads or plain calls). */
export const useRing = process.env.TIDEMARK_NO_URING !== '1';

const errnoNames = new Map([...util.getSystemErrorMap()].map(([k, v]) => [k, v]));

/** An error an addon returned as an errno (either sign), worded as Node words its own:
 *  `ENOENT: no such file or directory, open '/x'`. */
export function errnoError(
  errno: number,
  syscall: string,
  target: Uint8Array,
): { message: string; code: string } {
  const n = Math.abs(errno);
  const [code, text] = errnoNames.get(-n) ?? ['EIO', `error ${n}`];
  return { message: `${code}: ${text}, ${syscall} '${Buffer.from(target).toString()}'`, code };
}
