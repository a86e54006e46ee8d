// The JavaScript package on node (`node --test web/test/`, run by .ci/run's wasm stage after
// `bash web/build.sh`): the bundled beam scene steps on the f64 CPU path and agrees with the
// native `jello run` of the same file; errors are Errors carrying jello's message; meshes given
// as typed arrays and pin targets set from JavaScript do what they say.
//
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { initSync, Meshes, Simulation } from '../pkg/jello_web.js';
import { diagonal, maxDeviation, NATIVE_TOLERANCE, nativeFrames } from './native.mjs';

const web = dirname(dirname(fileURLToPath(import.meta.url)));
const scenePath = join(web, 'scenes', 'beam.toml');
const sceneText = readFileSync(scenePath, 'utf8');
initSync({ module: readFileSync(join(web, 'pkg', 'jello_web_bg.wasm')) });


test('the beam steps on the CPU backend and agrees with the native jello run', () => {
  const sim = new Simulation(sceneText);
  assert.equal(sim.backend, 'cpu');
  assert.equal(sim.solver, 'newton');
  const steps = sim.sceneSteps;
  assert.ok(steps >= 1);
  const x0 = sim.positionsF64();
  assert.equal(x0.length, 3 * sim.numVertices);
  const diag = diagonal(x0);

  const ours = [];
  const t0 = performance.now();
  for (let s = 1; s <= steps; s++) {
    const st = sim.step();
    assert.equal(st.step, s);
    assert.ok(st.converged, `step ${s} did not converge (residual ${st.residual})`);
    assert.ok(st.iterations >= 1);
    assert.ok(Number.isFinite(st.residual));
    ours.push(sim.positionsF64());
  }
  const seconds = (performance.now() - t0) / 1e3;
  const x = ours[steps - 1];
  assert.ok(x.every(Number.isFinite), 'positions finite');
  // Gravity pulls the free end down: the beam moved.
  assert.ok(maxDeviation(x, x0) > 1e-4 * diag, 'the beam moved');
  const f32 = sim.positions();
  assert.ok(f32 instanceof Float32Array);
  for (let i = 0; i < x.length; i++) assert.ok(Math.abs(f32[i] - x[i]) <= 1e-6 * Math.max(1, Math.abs(x[i])));

  const native = nativeFrames(scenePath, steps);
  let worst = 0;
  for (let s = 1; s <= steps; s++) worst = Math.max(worst, maxDeviation(ours[s - 1], native[s]) / diag);
  console.log(
    `web: beam, ${sim.numVertices} vertices, ${sim.numTets} tets, newton: ${steps} steps in ` +
      `${seconds.toFixed(3)} s on node (${(steps / seconds).toFixed(1)} steps/s); largest ` +
      `deviation from native jello run ${worst.toExponential(2)} of the diagonal (tolerance ${NATIVE_TOLERANCE})`,
  );
  assert.ok(worst <= NATIVE_TOLERANCE, `deviation ${worst} of the diagonal above ${NATIVE_TOLERANCE}`);
});

test('an unknown scene key throws an Error naming the key', () => {
  const bad = sceneText.replace('youngs_modulus = 1e5', 'youngs_modulos = 1e5');
  assert.notEqual(bad, sceneText);
  assert.throws(
    () => new Simulation(bad),
    (e) => e instanceof Error && e.message.includes('youngs_modulos') && e.message.startsWith('<string>'),
  );
  // A value out of range names its dotted key.
  const range = sceneText.replace('poisson_ratio = 0.3', 'poisson_ratio = 0.5');
  assert.throws(
    () => new Simulation(range),
    (e) => e instanceof Error && e.message.includes('objects[0].material.poisson_ratio'),
  );
  assert.throws(() => new Simulation(sceneText, undefined, 'no-such-solver'), /solver/);
});

test('a mesh given as typed arrays runs as the generated one it copies', () => {
  const generated = new Simulation(sceneText);
  const meshes = new Meshes();
  meshes.add('beam.msh', generated.positionsF64(), generated.tets());
  assert.equal(meshes.length, 1);
  const text = sceneText.replace(/mesh = \{ generator = "box"[^}]*\}/, 'mesh = { file = "beam.msh" }');
  assert.notEqual(text, sceneText);
  const given = new Simulation(text, meshes);
  assert.equal(given.numVertices, generated.numVertices);
  for (let s = 0; s < 3; s++) {
    generated.step();
    given.step();
  }
  assert.deepEqual(given.positionsF64(), generated.positionsF64());
  // A file the set does not hold is the scene's error, naming the key.
  assert.throws(() => new Simulation(text), (e) => e.message.includes('objects[0].mesh.file'));
  // Bad mesh data is refused with the mesh's name.
  const bad = new Meshes();
  assert.throws(
    () => bad.add('bad.msh', new Float64Array([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]), new Uint32Array([0, 1, 2, 4])),
    (e) => e instanceof Error && e.message.includes('bad.msh') && e.message.includes('vertex index 4'),
  );
});

test('pin targets set from JavaScript hold the pinned vertices there', () => {
  const sim = new Simulation(sceneText);
  assert.equal(sim.numPins, 1);
  const pinned = sim.pinVertices(0);
  assert.ok(pinned.length > 0);
  const targets = sim.pinTargets(0);
  assert.equal(targets.length, 3 * pinned.length);
  for (let i = 1; i < targets.length; i += 3) targets[i] += 0.01;
  sim.setPinTargets(0, targets);
  const st = sim.step();
  assert.ok(st.converged);
  const x = sim.positionsF64();
  pinned.forEach((v, k) => {
    for (let d = 0; d < 3; d++) {
      assert.ok(Math.abs(x[3 * v + d] - targets[3 * k + d]) <= 1e-12, `pinned vertex ${v} at its target`);
    }
  });
  assert.throws(() => sim.setPinTargets(0, targets.subarray(3)), /holds/);
  assert.throws(() => sim.setPinTargets(1, targets), /pin 1 does not exist/);
});

test('every solver the page offers steps the beam on wasm32', () => {
  const offered = [...readFileSync(join(web, 'index.html'), 'utf8').matchAll(/<option>([a-z0-9-]+)<\/option>/g)].map((m) => m[1]);
  assert.ok(offered.includes('newton') && offered.includes('jgs2'), `the page's solvers: ${offered}`);
  for (const solver of offered) {
    const sim = new Simulation(sceneText, undefined, solver);
    assert.ok(sim.solver.startsWith(solver), `${solver}: runs ${sim.solver}`);
    for (let s = 0; s < 3; s++) {
      const st = sim.step();
      assert.ok(st.converged, `${solver}: step ${st.step} did not converge (residual ${st.residual})`);
    }
    assert.ok(sim.positionsF64().every(Number.isFinite), `${solver}: positions finite`);
  }
});
