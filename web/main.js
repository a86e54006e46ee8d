// The page (web/index.html): a jello scene stepped by the WebAssembly package on the f64 CPU
// path, drawn with WebGPU from its positions every frame. Keeps
// `window.jelloStats = { step, iterations, residual, stepsPerSecond }` current for automated
// checks (web/test/page.test.mjs), and `window.jelloReady` true once the first frame is drawn.
import init, { Simulation } from './pkg/jello_web.js';

const $ = (id) => document.getElementById(id);
const canvas = $('view');
window.jelloStats = { step: 0, iterations: 0, residual: 0, stepsPerSecond: 0 };
window.jelloReady = false;
// `?scene=drop|beam&solver=newton|…` picks the start; `?steps=N` stops stepping after N steps
// (the page test compares that state with the native run).
const query = new URLSearchParams(location.search);
const stopAt = Number(query.get('steps')) || Infinity;
// `?offscreen` draws into no canvas (window.jelloCapture still draws and reads back): headless
// Chromium 156 on SwiftShader loses the device when a WebGPU canvas presents ("A valid external
// Instance reference no longer exists"), so the page test runs the page this way.
const offscreen = query.has('offscreen');
for (const key of ['scene', 'solver']) if (query.get(key)) $(key).value = query.get(key);

function fail(msg) {
  $('error').hidden = false;
  $('error').textContent = msg;
  window.jelloError = msg;
  console.error(msg);
}

// Column-major 4×4 matrices, as WGSL reads them.
function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2);
  const r = 1 / (near - far);
  return [f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, far * r, -1, 0, 0, near * far * r, 0];
}
function lookAt(eye, at, up) {
  const sub = (a, b) => a.map((x, i) => x - b[i]);
  const norm = (a) => { const l = Math.hypot(...a); return a.map((x) => x / l); };
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const z = norm(sub(eye, at));
  const x = norm(cross(up, z));
  const y = cross(z, x);
  return [x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0, -dot(x, eye), -dot(y, eye), -dot(z, eye), 1];
}
function mul(a, b) {
  const o = new Array(16).fill(0);
  for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) for (let k = 0; k < 4; k++) o[4 * c + r] += a[4 * k + r] * b[4 * c + k];
  return o;
}

const SHADER = /* wgsl */ `
struct Uniforms { mvp: mat4x4f, colour: vec4f, light: vec4f };
@group(0) @binding(0) var<uniform> u: Uniforms;
struct Out { @builtin(position) pos: vec4f, @location(0) world: vec3f };
@vertex fn vs(@location(0) p: vec3f) -> Out {
  var o: Out;
  o.pos = u.mvp * vec4f(p, 1.0);
  o.world = p;
  return o;
}
@fragment fn fs(i: Out) -> @location(0) vec4f {
  // Flat shading from the triangle's screen-space derivatives: no normals to upload.
  let n = normalize(cross(dpdx(i.world), dpdy(i.world)));
  let d = abs(dot(n, normalize(u.light.xyz)));
  var c = u.colour.rgb * (0.3 + 0.7 * d);
  if (u.colour.a < 0.5) {
    // The ground: a checkerboard of 0.1 m tiles.
    let t = (i32(floor(i.world.x * 10.0)) + i32(floor(i.world.z * 10.0))) & 1;
    c = u.colour.rgb * select(0.8, 1.0, t == 0);
  }
  return vec4f(c, 1.0);
}`;

async function main() {
  if (!navigator.gpu) return fail('This page needs WebGPU (a recent Chrome, Edge or Firefox Nightly).');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return fail('No WebGPU adapter was found.');
  const device = await adapter.requestDevice();
  device.addEventListener('uncapturederror', (e) => fail(`WebGPU: ${e.error.message}`));
  device.lost.then((info) => fail(`WebGPU device lost: ${info.message}`));
  // Kept reachable: Chromium (156, SwiftShader) loses the device once the adapter it came from
  // is garbage collected ("A valid external Instance reference no longer exists").
  window.jelloGpu = { adapter, device };
  await init();

  const context = canvas.getContext('webgpu');
  const format = navigator.gpu.getPreferredCanvasFormat();
  if (!offscreen) context.configure({ device, format, alphaMode: 'opaque' });
  const module = device.createShaderModule({ code: SHADER });
  const pipeline = device.createRenderPipeline({
    layout: 'auto',
    vertex: { module, entryPoint: 'vs', buffers: [{ arrayStride: 12, attributes: [{ shaderLocation: 0, offset: 0, format: 'float32x3' }] }] },
    fragment: { module, entryPoint: 'fs', targets: [{ format }] },
    primitive: { topology: 'triangle-list' },
    depthStencil: { format: 'depth24plus', depthWriteEnabled: true, depthCompare: 'less' },
    multisample: { count: 4 },
  });
  const uniform = (colour) => {
    const buf = device.createBuffer({ size: 96, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
    return { buf, group, colour };
  };
  const bodyU = uniform([0.95, 0.45, 0.55, 1]);
  const groundU = uniform([0.35, 0.38, 0.45, 0]);
  const g = 2.0;
  const groundVerts = device.createBuffer({ size: 48, usage: GPUBufferUsage.VERTEX | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(groundVerts, 0, new Float32Array([-g, 0, -g, g, 0, -g, g, 0, g, -g, 0, g]));
  const groundIdx = device.createBuffer({ size: 12, usage: GPUBufferUsage.INDEX | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(groundIdx, 0, new Uint16Array([0, 2, 1, 0, 3, 2]));

  let sim, verts, idx, count, sceneText;
  let colourTex, depthTex, size = [0, 0];
  const scenes = {};
  async function scene(name) {
    if (!scenes[name]) scenes[name] = await (await fetch(`./scenes/${name}.toml`)).text();
    return scenes[name];
  }
  async function reset() {
    try {
      sceneText = await scene($('scene').value);
      sim?.free();
      sim = new Simulation(sceneText, undefined, $('solver').value);
    } catch (e) {
      return fail(String(e.message ?? e));
    }
    $('error').hidden = true;
    const tris = sim.surfaceTriangles();
    count = tris.length;
    verts?.destroy();
    idx?.destroy();
    verts = device.createBuffer({ size: 12 * sim.numVertices, usage: GPUBufferUsage.VERTEX | GPUBufferUsage.COPY_DST });
    idx = device.createBuffer({ size: 4 * count, usage: GPUBufferUsage.INDEX | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(idx, 0, tris);
    window.jelloStats = { step: 0, iterations: 0, residual: 0, stepsPerSecond: 0 };
  }
  await reset();
  // For automated checks: the positions at full precision.
  window.jelloPositions = () => Array.from(sim.positionsF64());
  $('reset').onclick = reset;
  $('scene').onchange = reset;
  $('solver').onchange = reset;
  let paused = false;
  $('pause').onclick = () => { paused = !paused; $('pause').textContent = paused ? 'resume' : 'pause'; };

  const times = [];
  let last = null;
  function frame() {
    const w = Math.max(1, Math.floor(canvas.clientWidth * devicePixelRatio));
    const h = Math.max(1, Math.floor(canvas.clientHeight * devicePixelRatio));
    if (w !== size[0] || h !== size[1]) {
      size = [w, h];
      canvas.width = w;
      canvas.height = h;
      colourTex?.destroy();
      depthTex?.destroy();
      colourTex = device.createTexture({ size, format, sampleCount: 4, usage: GPUTextureUsage.RENDER_ATTACHMENT });
      depthTex = device.createTexture({ size, format: 'depth24plus', sampleCount: 4, usage: GPUTextureUsage.RENDER_ATTACHMENT });
    }
    if (sim && !paused && sim.stepCount < stopAt) {
      // Step for up to ~12 ms of a frame, at least once.
      const t0 = performance.now();
      do {
        try {
          last = sim.step();
        } catch (e) {
          paused = true;
          fail(String(e.message ?? e));
          break;
        }
        times.push(performance.now());
      } while (performance.now() - t0 < 12 && last.wallMs < 6 && sim.stepCount < stopAt);
      while (times.length && times[0] < performance.now() - 1000) times.shift();
      window.jelloStats = {
        step: sim.stepCount,
        iterations: last?.iterations ?? 0,
        residual: last?.residual ?? 0,
        stepsPerSecond: times.length > 1 ? (1000 * (times.length - 1)) / (times[times.length - 1] - times[0]) : 0,
      };
    }
    if (sim) {
      device.queue.writeBuffer(verts, 0, sim.positions());
      const s = window.jelloStats;
      $('readout').textContent =
        `${sim.numVertices} vertices, ${sim.numTets} tets · ${sim.solver} on the f64 CPU path (WebAssembly)\n` +
        `step ${s.step}   t = ${sim.time.toFixed(2)} s   ${s.stepsPerSecond.toFixed(1)} steps/s\n` +
        `iterations ${s.iterations}   residual ${s.residual.toExponential(2)}`;
    }
    if (!offscreen) draw(context.getCurrentTexture());
    window.jelloReady = true;
    requestAnimationFrame(frame);
  }
  // Draws the current state into `target` (the canvas's texture, or a capture's).
  function draw(target) {
    const mvp = mul(perspective(0.75, size[0] / size[1], 0.02, 20), lookAt([0.55, 0.42, 0.9], [0.15, 0.12, 0], [0, 1, 0]));
    for (const u of [bodyU, groundU]) device.queue.writeBuffer(u.buf, 0, new Float32Array([...mvp, ...u.colour, 0.3, 1, 0.5, 0]));
    const enc = device.createCommandEncoder();
    const pass = enc.beginRenderPass({
      colorAttachments: [{ view: colourTex.createView(), resolveTarget: target.createView(), clearValue: { r: 0.08, g: 0.09, b: 0.11, a: 1 }, loadOp: 'clear', storeOp: 'discard' }],
      depthStencilAttachment: { view: depthTex.createView(), depthClearValue: 1, depthLoadOp: 'clear', depthStoreOp: 'discard' },
    });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, groundU.group);
    pass.setVertexBuffer(0, groundVerts);
    pass.setIndexBuffer(groundIdx, 'uint16');
    pass.drawIndexed(6);
    if (sim) {
      pass.setBindGroup(0, bodyU.group);
      pass.setVertexBuffer(0, verts);
      pass.setIndexBuffer(idx, 'uint32');
      pass.drawIndexed(count);
    }
    pass.end();
    device.queue.submit([enc.finish()]);
  }
  // What WebGPU draws, read back (a headless browser's screenshot does not show a WebGPU
  // canvas): the current state drawn into a texture of the canvas's size, as RGBA rows.
  window.jelloCapture = async () => {
    const [w, h] = size;
    const tex = device.createTexture({ size, format, usage: GPUTextureUsage.RENDER_ATTACHMENT | GPUTextureUsage.COPY_SRC });
    draw(tex);
    const row = Math.ceil((4 * w) / 256) * 256;
    const buf = device.createBuffer({ size: row * h, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
    const enc = device.createCommandEncoder();
    enc.copyTextureToBuffer({ texture: tex }, { buffer: buf, bytesPerRow: row }, size);
    device.queue.submit([enc.finish()]);
    await buf.mapAsync(GPUMapMode.READ);
    const src = new Uint8Array(buf.getMappedRange());
    const rgba = new Uint8Array(4 * w * h);
    const bgra = format === 'bgra8unorm';
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const i = y * row + 4 * x, o = 4 * (y * w + x);
        rgba[o] = src[bgra ? i + 2 : i];
        rgba[o + 1] = src[i + 1];
        rgba[o + 2] = src[bgra ? i : i + 2];
        rgba[o + 3] = 255;
      }
    }
    buf.unmap();
    buf.destroy();
    tex.destroy();
    return { width: w, height: h, rgba };
  };
  requestAnimationFrame(frame);
}

main().catch((e) => fail(String(e?.message ?? e)));
