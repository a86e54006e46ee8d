// The native side of the web tests: `jello run` of a scene on the f64 CPU path, its frames read
// back at full precision.
//
// The binary: $JELLO_BIN, else $CARGO_TARGET_DIR (default ./target)/{debug,release}/jello,
// whichever is newer.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

// Agreement with native, as a fraction of the body's bounding-box diagonal: the same f64 code,
// but the native build orders the sparse Cholesky by METIS (AMD in wasm) and sums on several
// threads, so the two differ by round-off only (measured: see docs/src/web.md).
export const NATIVE_TOLERANCE = 1e-12;

export function nativeJello() {
  if (process.env.JELLO_BIN) return process.env.JELLO_BIN;
  const target = process.env.CARGO_TARGET_DIR || join(root, 'target');
  const found = ['debug', 'release']
    .map((p) => join(target, p, 'jello'))
    .filter((p) => existsSync(p))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  assert.ok(found.length > 0, `no native jello binary under ${target}/{debug,release} (cargo build --bin jello)`);
  return found[0];
}

// The Points array of a .vtu frame jello wrote: inline binary, base64 of (u64 byte count ‖
// little-endian f64 data).
export function vtuPoints(path) {
  const xml = readFileSync(path, 'utf8');
  const m = xml.match(/Name="Points"[^>]*format="binary">\s*([A-Za-z0-9+/=]+)\s*</);
  assert.ok(m, `${path}: no binary Points array`);
  const bytes = Buffer.from(m[1], 'base64');
  const n = Number(bytes.readBigUInt64LE(0));
  assert.equal(n, bytes.length - 8, `${path}: Points byte count`);
  const data = new Float64Array(n / 8);
  for (let i = 0; i < data.length; i++) data[i] = bytes.readDoubleLE(8 + 8 * i);
  return data;
}

export function diagonal(x) {
  const lo = [Infinity, Infinity, Infinity];
  const hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < x.length; i++) {
    lo[i % 3] = Math.min(lo[i % 3], x[i]);
    hi[i % 3] = Math.max(hi[i % 3], x[i]);
  }
  return Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
}

export function maxDeviation(a, b) {
  assert.equal(a.length, b.length);
  let worst = 0;
  for (let v = 0; v < a.length; v += 3) {
    worst = Math.max(worst, Math.hypot(a[v] - b[v], a[v + 1] - b[v + 1], a[v + 2] - b[v + 2]));
  }
  return worst;
}

// The positions of frames 0..=steps (every step's: the scene must write a frame per step) of
// `jello run scenePath --backend cpu --steps steps`.
export function nativeFrames(scenePath, steps) {
  const out = mkdtempSync(join(tmpdir(), 'jello-web-'));
  try {
    execFileSync(nativeJello(), ['run', scenePath, '--backend', 'cpu', '--steps', String(steps), '--out', out, '--overwrite'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const frames = [];
    for (let s = 0; s <= steps; s++) frames.push(vtuPoints(join(out, 'frames', `frame_${String(s).padStart(5, '0')}.vtu`)));
    return frames;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
