//! jello for JavaScript: a [`Simulation`] from a scene TOML string (and mesh data in typed
//! arrays), stepped on the f64 CPU path, with positions as typed arrays, pin targets and
//! per-step stats. Errors are JavaScript `Error`s whose message is jello's one-line message
//! (``<string>: key `objects[0].material.poisson_ratio`: …``).
//!
//! Built by `bash web/build.sh` (wasm-bindgen, `--target web`: an ES module that a page loads
//! with `await init()` and node with `initSync({ module })`); see docs/src/web.md.

use jello::gpu::Backend;
use jello::mesh::{mesh_from_arrays, surface};
use jello::runner::setup;
use jello::scene::{MeshFiles, Scene, SolverChoice};
use jello::solver::StepReport;
use std::path::Path;
use wasm_bindgen::prelude::*;

/// A JavaScript `Error` carrying `e`'s one-line message.
fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// The name a scene given as text has in messages (as the Python package's `Scene.from_toml`).
const SCENE_NAME: &str = "<string>";

/// Meshes for a scene's `mesh.file` entries, given as typed arrays (the browser has no files).
#[wasm_bindgen]
#[derive(Default)]
pub struct Meshes {
    meshes: MeshFiles,
}

#[wasm_bindgen]
impl Meshes {
    /// An empty set.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Meshes {
        Meshes::default()
    }

    /// Adds the mesh a scene names `mesh.file = name`: `positions` x, y, z per vertex (m),
    /// `tets` four 0-based vertex indices per tet. Checked as a mesh file is (range, finite,
    /// degenerate and duplicate tets; negatively oriented tets are reoriented with a warning);
    /// throws on the first problem. A second mesh under the same name replaces the first.
    pub fn add(&mut self, name: &str, positions: &[f64], tets: &[u32]) -> Result<(), JsError> {
        let mesh = mesh_from_arrays(Path::new(name), positions, tets).map_err(js_err)?;
        self.meshes.insert(name.to_string(), mesh);
        Ok(())
    }

    /// How many meshes the set holds.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.meshes.len()
    }
}

/// One step's report (the entries `stats.json` has for it that a page reads).
#[wasm_bindgen]
#[derive(Clone, Debug)]
pub struct StepStats {
    /// The step's number (1 for the first).
    pub step: usize,
    /// Simulated time at the step's end, s.
    pub time: f64,
    /// Solver iterations (every solve of the step).
    pub iterations: usize,
    /// The final characteristic-norm residual.
    pub residual: f64,
    /// The stop rule was met and the state check is clean.
    pub converged: bool,
    /// E(x_end) − E(x_start), J.
    #[wasm_bindgen(js_name = energyChange)]
    pub energy_change: f64,
    /// Wall time of the step, ms (the host's clock).
    #[wasm_bindgen(js_name = wallMs)]
    pub wall_ms: f64,
    warnings: Vec<String>,
}

#[wasm_bindgen]
impl StepStats {
    /// The step's warnings (the lines `jello run` prints), one string each.
    #[wasm_bindgen(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

/// A running simulation of a scene on the f64 CPU path, set up as `jello run --backend cpu`
/// sets it up.
#[wasm_bindgen]
pub struct Simulation {
    sim: jello::sim::Simulation,
    solver: String,
    scene_steps: usize,
    warnings: Vec<String>,
    surface: Vec<u32>,
}

#[wasm_bindgen]
impl Simulation {
    /// Parses and builds `scene` (TOML text; messages name it `<string>`), taking the meshes
    /// its `mesh.file` entries name from `meshes`, and sets it up on the CPU backend with
    /// `solver` in place of the scene's own when given (as `jello run --solver`). Throws an
    /// `Error` with jello's message for anything invalid.
    #[wasm_bindgen(constructor)]
    pub fn new(
        scene: &str,
        meshes: Option<Meshes>,
        solver: Option<String>,
    ) -> Result<Simulation, JsError> {
        let parsed = Scene::parse(Path::new(SCENE_NAME), scene).map_err(js_err)?;
        let mut built = parsed
            .build_with_meshes(&meshes.unwrap_or_default().meshes)
            .map_err(js_err)?;
        if let Some(s) = solver {
            built
                .config
                .set_solver(SolverChoice::parse(&s).map_err(|e| js_err(format!("solver: {e}")))?);
        }
        let surface = surface(&built.model.mesh)
            .triangles
            .into_iter()
            .flatten()
            .collect();
        let set = setup(&built, Backend::Cpu, None).map_err(js_err)?;
        Ok(Simulation {
            solver: set.sim.solver_name(),
            sim: set.sim,
            scene_steps: built.config.steps,
            warnings: built.warnings,
            surface,
        })
    }

    /// Advances one step and returns its stats; throws when the step fails.
    pub fn step(&mut self) -> Result<StepStats, JsError> {
        let report = self.sim.step(false).map_err(js_err)?;
        Ok(self.stats(report))
    }

    /// Runs `steps` steps and returns the last one's stats (`undefined` for 0).
    pub fn run(&mut self, steps: usize) -> Result<Option<StepStats>, JsError> {
        let mut last = None;
        for _ in 0..steps {
            last = Some(self.step()?);
        }
        Ok(last)
    }

    fn stats(&self, r: StepReport) -> StepStats {
        StepStats {
            step: self.sim.steps,
            time: self.sim.state.t,
            iterations: r.iterations,
            residual: r.residual,
            converged: r.converged,
            energy_change: r.energy_change,
            wall_ms: r.wall_ms,
            warnings: r.warnings,
        }
    }

    /// Positions, x, y, z per vertex (m), as f32 for drawing (a copy).
    pub fn positions(&self) -> Vec<f32> {
        self.sim.state.x.iter().map(|&x| x as f32).collect()
    }

    /// Positions at full precision, x, y, z per vertex (m; a copy).
    #[wasm_bindgen(js_name = positionsF64)]
    pub fn positions_f64(&self) -> Vec<f64> {
        self.sim.state.x.clone()
    }

    /// Velocities, x, y, z per vertex (m/s; a copy).
    pub fn velocities(&self) -> Vec<f64> {
        self.sim.state.v.clone()
    }

    /// Tets, four vertex indices each.
    pub fn tets(&self) -> Vec<u32> {
        self.sim.model.mesh.tets.iter().flatten().copied().collect()
    }

    /// The boundary surface's triangles, three vertex indices each, wound outward.
    #[wasm_bindgen(js_name = surfaceTriangles)]
    pub fn surface_triangles(&self) -> Vec<u32> {
        self.surface.clone()
    }

    /// Number of vertices.
    #[wasm_bindgen(getter, js_name = numVertices)]
    pub fn num_vertices(&self) -> usize {
        self.sim.model.num_vertices()
    }

    /// Number of tets.
    #[wasm_bindgen(getter, js_name = numTets)]
    pub fn num_tets(&self) -> usize {
        self.sim.model.mesh.num_tets()
    }

    /// Simulated time, s.
    #[wasm_bindgen(getter)]
    pub fn time(&self) -> f64 {
        self.sim.state.t
    }

    /// Steps taken.
    #[wasm_bindgen(getter, js_name = stepCount)]
    pub fn step_count(&self) -> usize {
        self.sim.steps
    }

    /// The scene's `simulation.steps`.
    #[wasm_bindgen(getter, js_name = sceneSteps)]
    pub fn scene_steps(&self) -> usize {
        self.scene_steps
    }

    /// Time step, s.
    #[wasm_bindgen(getter)]
    pub fn h(&self) -> f64 {
        self.sim.h
    }

    /// The solver stepping the scene (`newton`, `qn`, …).
    #[wasm_bindgen(getter)]
    pub fn solver(&self) -> String {
        self.solver.clone()
    }

    /// The backend (`cpu`: the f64 path; the device path in the browser is to come).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        "cpu".to_string()
    }

    /// Warnings building the scene gave (e.g. reoriented tets).
    #[wasm_bindgen(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Number of pins (in scene order).
    #[wasm_bindgen(getter, js_name = numPins)]
    pub fn num_pins(&self) -> usize {
        self.sim.model.pins.len()
    }

    /// The vertices pin `pin` holds.
    #[wasm_bindgen(js_name = pinVertices)]
    pub fn pin_vertices(&self, pin: usize) -> Result<Vec<u32>, JsError> {
        Ok(self.pin(pin)?.vertices.clone())
    }

    /// Where pin `pin` holds its vertices at the end of the next step, x, y, z each (m), in
    /// `pinVertices(pin)` order.
    #[wasm_bindgen(js_name = pinTargets)]
    pub fn pin_targets(&self, pin: usize) -> Result<Vec<f64>, JsError> {
        self.pin(pin)?;
        let t = self.sim.state.t + self.sim.h;
        let targets = self.sim.pin_targets(pin, t).unwrap_or_default();
        Ok(targets.into_iter().flatten().collect())
    }

    /// Drives pin `pin`: from the next step on its vertices end every step at `targets`
    /// (x, y, z per vertex in `pinVertices(pin)` order, m) until set again; the pin's scripted
    /// motion is replaced.
    #[wasm_bindgen(js_name = setPinTargets)]
    pub fn set_pin_targets(&mut self, pin: usize, targets: &[f64]) -> Result<(), JsError> {
        let k = self.pin(pin)?.vertices.len();
        if targets.len() != 3 * k {
            return Err(js_err(format!(
                "targets: pin {pin} holds {k} vertices, want {} numbers, got {}",
                3 * k,
                targets.len()
            )));
        }
        let rows: Vec<[f64; 3]> = targets
            .chunks_exact(3)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        self.sim.set_pin_targets(pin, &rows).map_err(js_err)
    }
}

impl Simulation {
    fn pin(&self, pin: usize) -> Result<&jello::problem::Pin, JsError> {
        self.sim.model.pins.get(pin).ok_or_else(|| {
            js_err(format!(
                "pin {pin} does not exist: the model has {} pin(s) (0-based, in scene order)",
                self.sim.model.pins.len()
            ))
        })
    }
}
