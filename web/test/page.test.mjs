// The page in a real headless browser (`node --test web/test/page.test.mjs`, run by .ci/run's
// wasm stage after `bash web/build.sh` and `npm ci` in web/): web/dist/ served on localhost,
// Debian's chromium-headless-shell driven by puppeteer-core, WebGPU through SwiftShader.
// Asserts: the page loads without console errors; the ball drop steps; its positions stay
// finite and agree with the native `jello run` of the same scene (the same f64 CPU code);
// what WebGPU drew shows the ball (pixels of its colour, around the middle of the view),
// written to web/dist/screenshot.png.
//
// The browser: $CHROMIUM, else /usr/bin/chromium-headless-shell, else /usr/bin/chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { diagonal, maxDeviation, NATIVE_TOLERANCE, nativeFrames } from './native.mjs';

const web = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = join(web, 'dist');
const STEPS = 12;

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.toml': 'text/plain', '.ts': 'text/plain' };

function serve() {
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = join(dist, path.endsWith('/') ? join(path, 'index.html') : path);
    if (!file.startsWith(dist) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function browserPath() {
  const found = [process.env.CHROMIUM, '/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find((p) => p && existsSync(p));
  assert.ok(found, 'no Chromium: apt-get install chromium-headless-shell, or set CHROMIUM');
  return found;
}

test('the page steps the ball drop in headless Chromium, agrees with native and draws it', async () => {
  assert.ok(existsSync(join(dist, 'index.html')), 'web/dist/ is missing: run bash web/build.sh');
  const server = await serve();
  const browser = await puppeteer.launch({
    executablePath: browserPath(),
    headless: 'shell',
    args: ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--no-sandbox'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 800, height: 600 });
    const errors = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    // Offscreen: this browser loses the WebGPU device when a canvas presents (web/main.js).
    const url = `http://127.0.0.1:${server.address().port}/?scene=drop&solver=newton&steps=${STEPS}&offscreen`;
    const t0 = performance.now();
    await page.goto(url);
    await page.waitForFunction('window.jelloReady === true || window.jelloError', { timeout: 60_000 });
    const firstFrame = performance.now() - t0;
    assert.equal(await page.evaluate('window.jelloError'), undefined);
    await page.waitForFunction(`window.jelloStats.step >= ${STEPS}`, { timeout: 120_000 });
    const stats = await page.evaluate('window.jelloStats');
    assert.equal(stats.step, STEPS);
    assert.ok(stats.iterations >= 1 && Number.isFinite(stats.residual));
    const x = Float64Array.from(await page.evaluate('window.jelloPositions()'));
    assert.ok(x.every(Number.isFinite), 'positions finite');

    const native = nativeFrames(join(web, 'scenes', 'drop.toml'), STEPS);
    const deviation = maxDeviation(x, native[STEPS]) / diagonal(native[0]);
    assert.ok(deviation <= NATIVE_TOLERANCE, `deviation ${deviation} of the diagonal above ${NATIVE_TOLERANCE}`);
    assert.ok(maxDeviation(x, native[0]) > 1e-3 * diagonal(native[0]), 'the ball moved');

    // What WebGPU drew (window.jelloCapture reads it back: a headless screenshot leaves a
    // WebGPU canvas blank), written as a PNG and searched for the body's colour.
    const { count, cx, cy, w, h, png } = await page.evaluate(async () => {
      const { width: w, height: h, rgba } = await window.jelloCapture();
      let count = 0, sx = 0, sy = 0;
      for (let i = 0; i < rgba.length; i += 4) {
        // The body's colour (pink: red well above green and blue), lit or in shade.
        if (rgba[i] > 60 && rgba[i] > 1.5 * rgba[i + 1] && rgba[i] > 1.3 * rgba[i + 2]) {
          count++;
          sx += (i / 4) % w;
          sy += Math.floor(i / 4 / w);
        }
      }
      const c = document.createElement('canvas');
      c.width = w;
      c.height = h;
      c.getContext('2d').putImageData(new ImageData(new Uint8ClampedArray(rgba.buffer), w, h), 0, 0);
      return { count, cx: sx / count, cy: sy / count, w, h, png: c.toDataURL('image/png').split(',')[1] };
    });
    writeFileSync(join(dist, 'screenshot.png'), Buffer.from(png, 'base64'));
    assert.ok(count > 0.005 * w * h, `only ${count} body-coloured pixels of ${w}×${h}`);
    assert.ok(cx > 0.2 * w && cx < 0.8 * w && cy > 0.2 * h && cy < 0.9 * h, `the body is drawn off centre (${cx}, ${cy})`);
    assert.deepEqual(errors, [], 'console errors');
    console.log(
      `web page: first frame ${firstFrame.toFixed(0)} ms after navigation; ${STEPS} steps of the ball drop ` +
        `(${stats.stepsPerSecond.toFixed(1)} steps/s in headless Chromium); deviation from native ` +
        `${deviation.toExponential(2)} of the diagonal; ${count} body pixels, screenshot web/dist/screenshot.png`,
    );
  } finally {
    await browser.close();
    server.close();
  }
});
