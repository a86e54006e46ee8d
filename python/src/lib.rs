//! `jello._jello`: the Python bindings of jello's public Rust API (PyO3 + rust-numpy).
//!
//! Wraps [`jello::scene::Scene`] / [`jello::scene::BuiltScene`] (`jello.Scene`),
//! [`jello::mesh::TetMesh`] (`jello.Mesh`), [`jello::sim::Simulation`] as the runner sets it up
//! (`jello.Simulation`), [`jello::output::Checkpoint`] (`jello.read_checkpoint`) and
//! [`jello::gpu::list_adapters`] (`jello.adapters`). `python/jello/__init__.pyi` documents the
//! Python side; units are SI throughout (m, s, kg, Pa, J).
//!
//! Every [`jello::JelloError`] becomes a Python exception whose message is jello's one-line `Display`
//! (the same line the CLI prints): `jello.InputError` for what the caller got wrong (files,
//! scenes, meshes, arguments), `jello.SolverError` and `jello.GpuError` for failures while
//! running; all three derive from `jello.JelloError`.

use jello::adjoint::{BackwardStats, Checkpointing, Param, RecordOptions, Seeds, Tape, Unconverged};
use jello::error::JelloError as Error;
use jello::gpu::Backend;
use jello::mesh::TetMesh;
use jello::output::{Checkpoint, StepStats};
use jello::scene::{BuiltScene, Scene};
use jello::sim::Simulation;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pyo3::create_exception!(
    jello,
    JelloError,
    PyException,
    "Base class of every error jello raises; str(e) is jello's one-line message."
);
pyo3::create_exception!(
    jello,
    InputError,
    JelloError,
    "Bad input: a file that cannot be read or parsed, an invalid scene key, mesh or argument."
);
pyo3::create_exception!(
    jello,
    SolverError,
    JelloError,
    "A step failed numerically (a non-finite state, a failed factorisation, ...)."
);
pyo3::create_exception!(
    jello,
    GpuError,
    JelloError,
    "A GPU-side failure: no adapter when one was required, a device error."
);

/// The Python exception for a jello error, carrying its one-line message.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string().replace('\n', " ");
    match e {
        Error::Solver(_) => SolverError::new_err(msg),
        Error::Gpu(_) => GpuError::new_err(msg),
        _ => InputError::new_err(msg),
    }
}

/// An argument error raised as `jello.InputError`.
fn invalid(msg: impl Into<String>) -> PyErr {
    InputError::new_err(msg.into())
}

/// `obj` as a C-contiguous 2-D numpy array of `dtype` with `cols` columns: the same array when
/// it already is one (no copy), else numpy's conversion (`what` names the argument in errors).
fn as_rows<'py, T: numpy::Element>(
    obj: &Bound<'py, PyAny>,
    dtype: &str,
    cols: usize,
    what: &str,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let arr = np
        .call_method1("ascontiguousarray", (obj, dtype))
        .map_err(|e| invalid(format!("{what}: not convertible to a {dtype} array ({e})")))?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    if shape.len() != 2 || shape[1] != cols {
        return Err(invalid(format!(
            "{what}: expected an (n, {cols}) array, got shape {shape:?}"
        )));
    }
    Ok(arr.cast_into::<PyArray2<T>>()?)
}

/// A flat xyz vector as a new (n, 3) float64 array.
fn rows3<'py>(py: Python<'py>, flat: &[f64]) -> PyResult<Bound<'py, PyArray2<f64>>> {
    PyArray1::from_slice(py, flat).reshape([flat.len() / 3, 3])
}

/// A flat xyz array of (n, 3) values that must all be finite (`what` names it in errors).
fn finite_rows3(obj: &Bound<'_, PyAny>, n: usize, what: &str) -> PyResult<Vec<f64>> {
    let arr = as_rows::<f64>(obj, "float64", 3, what)?;
    let ro = arr.readonly();
    let flat = ro.as_slice()?;
    if flat.len() != 3 * n {
        return Err(invalid(format!(
            "{what}: expected ({n}, 3), got ({}, 3)",
            flat.len() / 3
        )));
    }
    if let Some(k) = flat.iter().position(|v| !v.is_finite()) {
        return Err(invalid(format!(
            "{what}: row {} has a non-finite value {}",
            k / 3,
            flat[k]
        )));
    }
    Ok(flat.to_vec())
}

/// A JSON-serialisable value as Python objects (through the `json` module, so the dict is
/// exactly what `stats.json` holds).
fn to_python<'py>(py: Python<'py>, v: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v)
        .map_err(|e| invalid(format!("cannot serialise the report: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}

// ---------------------------------------------------------------------------------------------
// Scene

/// A scene file parsed and built (mesh generated or read, materials, pins, obstacles checked).
#[pyclass(name = "Scene", module = "jello", frozen)]
struct PyScene {
    built: BuiltScene,
    path: PathBuf,
}

impl PyScene {
    fn from_scene(scene: Scene) -> PyResult<Self> {
        let built = scene.build().map_err(py_err)?;
        Ok(PyScene {
            built,
            path: scene.path,
        })
    }
}

#[pymethods]
impl PyScene {
    /// Reads, parses and builds a scene file (relative mesh paths are relative to its folder).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Self::from_scene(Scene::load(&path).map_err(py_err)?)
    }

    /// Parses and builds scene text; relative mesh paths resolve against `base_dir` (default
    /// the current directory) and messages name the scene `<string>`.
    #[staticmethod]
    #[pyo3(signature = (text, base_dir=None))]
    fn from_toml(text: &str, base_dir: Option<PathBuf>) -> PyResult<Self> {
        let path = base_dir.unwrap_or_default().join("<string>");
        Self::from_scene(Scene::parse(&path, text).map_err(py_err)?)
    }

    /// The scene file (`<string>` under `base_dir` for `from_toml`).
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
    /// Time step, s.
    #[getter]
    fn h(&self) -> f64 {
        self.built.config.h
    }
    /// Steps the scene asks for (`simulation.steps`).
    #[getter]
    fn steps(&self) -> usize {
        self.built.config.steps
    }
    /// The scene's solver name (`auto` when the scene asks the runner to pick one).
    #[getter]
    fn solver(&self) -> String {
        if self.built.config.auto_solver {
            "auto".to_string()
        } else {
            self.built.config.solver.name().to_string()
        }
    }
    /// Vertices of all objects together.
    #[getter]
    fn num_vertices(&self) -> usize {
        self.built.model.num_vertices()
    }
    /// Tetrahedra of all objects together.
    #[getter]
    fn num_tets(&self) -> usize {
        self.built.model.mesh.num_tets()
    }
    /// Warnings from building the scene (e.g. reoriented tets).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.built.warnings.clone()
    }
    /// The rest mesh of all objects together (vertices in m).
    fn mesh(&self, py: Python<'_>) -> PyResult<PyMesh> {
        PyMesh::from_tet_mesh(py, &self.built.model.mesh, Vec::new())
    }
    fn __repr__(&self) -> String {
        format!(
            "jello.Scene('{}', {} vertices, {} tets, solver {}, h = {} s, {} steps)",
            self.path.display(),
            self.num_vertices(),
            self.num_tets(),
            self.solver(),
            self.built.config.h,
            self.built.config.steps
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Mesh

/// A linear tetrahedral mesh: `vertices` (n, 3) float64 in m, `tets` (m, 4) int64, every tet
/// positively oriented.
#[pyclass(name = "Mesh", module = "jello", frozen)]
struct PyMesh {
    vertices: Py<PyArray2<f64>>,
    tets: Py<PyArray2<i64>>,
    warnings: Vec<String>,
}

impl PyMesh {
    fn from_tet_mesh(py: Python<'_>, mesh: &TetMesh, warnings: Vec<String>) -> PyResult<Self> {
        let flat: Vec<f64> = mesh.positions.iter().flatten().copied().collect();
        let tets: Vec<i64> = mesh.tets.iter().flatten().map(|&i| i as i64).collect();
        Ok(PyMesh {
            vertices: rows3(py, &flat)?.unbind(),
            tets: PyArray1::from_vec(py, tets)
                .reshape([mesh.num_tets(), 4])?
                .unbind(),
            warnings,
        })
    }

    fn to_tet_mesh(&self, py: Python<'_>) -> PyResult<TetMesh> {
        let v = self.vertices.bind(py).readonly();
        let t = self.tets.bind(py).readonly();
        Ok(TetMesh {
            positions: v
                .as_slice()?
                .chunks_exact(3)
                .map(|p| [p[0], p[1], p[2]])
                .collect(),
            tets: t
                .as_slice()?
                .chunks_exact(4)
                .map(|c| [c[0] as u32, c[1] as u32, c[2] as u32, c[3] as u32])
                .collect(),
        })
    }
}

#[pymethods]
impl PyMesh {
    /// A mesh from arrays: `vertices` (n, 3) in m (any real dtype; float64 C-contiguous input
    /// is kept without a copy) and `tets` (m, 4) 0-based vertex indices (any integer dtype;
    /// int64 C-contiguous input is kept without a copy unless tets must be reoriented).
    /// Negatively oriented tets get two vertices swapped, as the file readers do (counted in
    /// `warnings`); out-of-range indices, non-finite coordinates and degenerate tets raise
    /// `InputError`.
    #[staticmethod]
    fn from_arrays(
        py: Python<'_>,
        vertices: &Bound<'_, PyAny>,
        tets: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let v = as_rows::<f64>(vertices, "float64", 3, "vertices")?;
        let mut t = as_rows::<i64>(tets, "int64", 4, "tets")?;
        let n = v.shape()[0];
        let mut mesh = {
            let tr = t.readonly();
            let ts = tr.as_slice()?;
            if let Some(k) = ts.iter().position(|&i| i < 0 || i as usize >= n) {
                return Err(invalid(format!(
                    "tets: row {} has vertex index {} outside 0..{n}",
                    k / 4,
                    ts[k]
                )));
            }
            PyMesh {
                vertices: v.clone().unbind(),
                tets: t.clone().unbind(),
                warnings: Vec::new(),
            }
            .to_tet_mesh(py)?
        };
        let negative: Vec<usize> = (0..mesh.num_tets())
            .filter(|&k| mesh.signed_volume(k) < 0.0)
            .collect();
        for &k in &negative {
            mesh.tets[k].swap(2, 3);
        }
        mesh.validate().map_err(py_err)?;
        let mut warnings = Vec::new();
        if !negative.is_empty() {
            warnings.push(format!(
                "{} negatively oriented tet(s) reoriented (two vertices swapped; first: tet {})",
                negative.len(),
                negative[0]
            ));
            let flat: Vec<i64> = mesh.tets.iter().flatten().map(|&i| i as i64).collect();
            t = PyArray1::from_vec(py, flat).reshape([mesh.num_tets(), 4])?;
        }
        Ok(PyMesh {
            vertices: v.unbind(),
            tets: t.unbind(),
            warnings,
        })
    }

    /// Vertex positions, (n, 3) float64, m (the mesh's own array, not a copy).
    #[getter]
    fn vertices(&self, py: Python<'_>) -> Py<PyArray2<f64>> {
        self.vertices.clone_ref(py)
    }
    /// Tetrahedra, (m, 4) int64 vertex indices (the mesh's own array, not a copy).
    #[getter]
    fn tets(&self, py: Python<'_>) -> Py<PyArray2<i64>> {
        self.tets.clone_ref(py)
    }
    /// Number of vertices.
    #[getter]
    fn num_vertices(&self, py: Python<'_>) -> usize {
        self.vertices.bind(py).shape()[0]
    }
    /// Number of tetrahedra.
    #[getter]
    fn num_tets(&self, py: Python<'_>) -> usize {
        self.tets.bind(py).shape()[0]
    }
    /// What reading or building the mesh repaired or ignored.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    /// Writes the mesh in the format named by the extension: `.vtu`, `.obj` / `.ply`
    /// (boundary surface), `.node` / `.ele` (TetGen pair), `.msh` (gmsh 2.2 ASCII).
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let mesh = self.to_tet_mesh(py)?;
        py.detach(|| jello::mesh::write_mesh(&path, &mesh))
            .map_err(py_err)
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "jello.Mesh({} vertices, {} tets)",
            self.num_vertices(py),
            self.num_tets(py)
        )
    }
}

/// Reads a tetrahedral mesh file (gmsh `.msh`, Medit `.mesh`, legacy VTK `.vtk`, TetGen `.node`/`.ele`).
#[pyfunction]
fn read_mesh(py: Python<'_>, path: PathBuf) -> PyResult<PyMesh> {
    let loaded = py
        .detach(|| jello::mesh::read_mesh(&path))
        .map_err(py_err)?;
    PyMesh::from_tet_mesh(py, &loaded.mesh, loaded.warnings)
}

// ---------------------------------------------------------------------------------------------
// Simulation

/// Carries values that are not `Send` (the simulation: its solver is a `Box<dyn StepSolver>`)
/// into and out of [`Python::detach`]'s closure. Sound because `detach` runs the closure on the
/// calling thread before it returns (it only releases the GIL), nothing inside touches a Python
/// object, and the `Simulation` is `unsendable` (PyO3 refuses other threads) and mutably
/// borrowed for the whole call (PyO3 refuses re-entrant use).
struct SameThread<T>(T);
// SAFETY: see the type's docs; the value never leaves the calling thread.
unsafe impl<T> Send for SameThread<T> {}
impl<T> SameThread<T> {
    /// The value (a method, so that a closure captures the whole wrapper, not its field).
    fn into_inner(self) -> T {
        self.0
    }
}

/// A running simulation of a scene, set up exactly as `jello run` sets it up.
#[pyclass(name = "Simulation", module = "jello", unsendable)]
struct PySimulation {
    sim: Simulation,
    backend: String,
    backend_reason: String,
    solver_auto_reason: Option<String>,
    adapter: Option<String>,
    scene_steps: usize,
    trace: bool,
}

impl PySimulation {
    /// One step with the GIL released; the report as `stats.json` holds it (plus `warnings`).
    fn step_report<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let sim = SameThread(&mut self.sim);
        let trace = self.trace;
        let report = py
            .detach(move || SameThread(sim.into_inner().step(trace)))
            .into_inner()
            .map_err(py_err)?;
        let warnings = report.warnings.clone();
        let stats = StepStats::new(self.sim.steps, self.sim.state.t, report);
        let dict = to_python(py, &stats)?.cast_into::<PyDict>()?;
        dict.set_item("warnings", warnings)?;
        Ok(dict)
    }

    fn pin(&self, pin: usize) -> PyResult<&jello::problem::Pin> {
        self.sim.model.pins.get(pin).ok_or_else(|| {
            invalid(format!(
                "pin {pin} does not exist: the model has {} pin(s) (0-based, in scene order)",
                self.sim.model.pins.len()
            ))
        })
    }
}

#[pymethods]
impl PySimulation {
    /// Sets up `scene` on `backend` ("auto", "cpu" or "gpu", as `jello run --backend`), with
    /// `solver` in place of the scene's own when given (as `jello run --solver`). `trace=True`
    /// records every iteration's residual and energy in the step reports (`trace`).
    #[new]
    #[pyo3(signature = (scene, solver=None, backend="auto", trace=false))]
    fn new(
        py: Python<'_>,
        scene: &PyScene,
        solver: Option<&str>,
        backend: &str,
        trace: bool,
    ) -> PyResult<Self> {
        let backend: Backend = backend
            .parse()
            .map_err(|e: Error| invalid(format!("backend: {e}")))?;
        let mut built = scene.built.clone();
        if let Some(s) = solver {
            built.config.set_solver(
                jello::scene::SolverChoice::parse(s).map_err(|e| invalid(format!("solver: {e}")))?,
            );
        }
        // The CLI's cache folder (subspaces, partitions) next to a scene file; none for text.
        let cache_dir = match scene.path.file_name() {
            Some(n) if n == "<string>" => None,
            _ => scene.path.parent().map(|d| d.join(".jello-cache")),
        };
        let scene_steps = built.config.steps;
        let built = SameThread(&built);
        let setup = py
            .detach(move || {
                SameThread(jello::runner::setup(
                    built.into_inner(),
                    backend,
                    cache_dir.as_deref(),
                ))
            })
            .into_inner()
            .map_err(py_err)?;
        Ok(PySimulation {
            sim: setup.sim,
            backend: setup.choice.kind().to_string(),
            backend_reason: setup.choice.reason.clone(),
            solver_auto_reason: setup.auto.map(|p| p.reason),
            adapter: setup.adapter,
            scene_steps,
            trace,
        })
    }

    /// Advances one step and returns its report: the entry `stats.json` holds for it (`step`,
    /// `time` (s), `iterations`, `converged`, `stop_rule_met`, `substeps`, `inverted`,
    /// `penetrations`, `crossings` (objects first passing through each other without IPC
    /// contact), `failure`, `residual`, `energy` (J), `energy_change` (J), `wall_ms`,
    /// `output_ms` (0 here), `timings`, `work` (a dict: `cg_iterations` per level,
    /// `line_search_trials`, `refactorisations`, ADMM's `primal` and `dual`), `trace`) plus `warnings` (the lines `jello run`
    /// prints). The GIL is released while stepping.
    fn step<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.step_report(py)
    }

    /// Runs `steps` steps (default: the scene's `simulation.steps`) and returns their reports.
    /// `callback(sim, report)` is called after each step with the GIL held (it may read and
    /// set positions, velocities and pin targets); returning `False` stops the run. Ctrl-C
    /// stops it between steps with `KeyboardInterrupt`.
    #[pyo3(signature = (steps=None, callback=None))]
    fn run<'py>(
        slf: &Bound<'py, Self>,
        steps: Option<usize>,
        callback: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let steps = steps.unwrap_or_else(|| slf.borrow().scene_steps);
        let reports = PyList::empty(py);
        for _ in 0..steps {
            py.check_signals()?;
            let report = slf.borrow_mut().step_report(py)?;
            reports.append(&report)?;
            if let Some(cb) = &callback {
                let r = cb.call1((slf, &report))?;
                if r.is_instance_of::<pyo3::types::PyBool>() && !r.extract::<bool>()? {
                    break;
                }
            }
        }
        Ok(reports)
    }

    /// Positions, (n, 3) float64, m: a copy of the current state (the simulation swaps its
    /// buffers every step, so a view would go stale). Assign an (n, 3) array to move the
    /// vertices: the next step starts there. Setting it drops a BDF2 run's history, so its
    /// next step is a first (implicit-Euler) step.
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        rows3(py, &self.sim.state.x)
    }
    #[setter]
    fn set_positions(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let n = self.sim.model.num_vertices();
        self.sim.state.x = finite_rows3(value, n, "positions")?;
        self.sim.state.history = None;
        Ok(())
    }

    /// Velocities, (n, 3) float64, m/s: a copy, settable like `positions` (drops a BDF2 run's
    /// history too).
    #[getter]
    fn velocities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        rows3(py, &self.sim.state.v)
    }
    #[setter]
    fn set_velocities(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let n = self.sim.model.num_vertices();
        self.sim.state.v = finite_rows3(value, n, "velocities")?;
        self.sim.state.history = None;
        Ok(())
    }

    /// Simulated time, s.
    #[getter]
    fn time(&self) -> f64 {
        self.sim.state.t
    }
    /// Steps taken so far.
    #[getter]
    fn step_count(&self) -> usize {
        self.sim.steps
    }
    /// Time step, s.
    #[getter]
    fn h(&self) -> f64 {
        self.sim.h
    }
    /// The solver's name.
    #[getter]
    fn solver(&self) -> String {
        self.sim.solver_name()
    }
    /// Where element work runs: "cpu" or "gpu".
    #[getter]
    fn backend(&self) -> String {
        self.backend.clone()
    }
    /// Why that backend (e.g. why `auto` chose the CPU).
    #[getter]
    fn backend_reason(&self) -> String {
        self.backend_reason.clone()
    }
    /// With `solver="auto"` (or a scene's `name = "auto"`): why the rule picked `solver`;
    /// None when the solver was named.
    #[getter]
    fn solver_auto_reason(&self) -> Option<String> {
        self.solver_auto_reason.clone()
    }
    /// The GPU adapter's description, or None on the CPU.
    #[getter]
    fn adapter(&self) -> Option<String> {
        self.adapter.clone()
    }
    /// Number of vertices.
    #[getter]
    fn num_vertices(&self) -> usize {
        self.sim.model.num_vertices()
    }
    /// Tetrahedra, (m, 4) int64 vertex indices.
    #[getter]
    fn tets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let flat: Vec<i64> = self
            .sim
            .model
            .mesh
            .tets
            .iter()
            .flatten()
            .map(|&i| i as i64)
            .collect();
        PyArray1::from_vec(py, flat).reshape([self.sim.model.mesh.num_tets(), 4])
    }
    /// The mesh at the current positions (e.g. `sim.mesh().write("frame.vtu")`).
    fn mesh(&self, py: Python<'_>) -> PyResult<PyMesh> {
        let mesh = TetMesh {
            positions: self
                .sim
                .state
                .x
                .chunks_exact(3)
                .map(|p| [p[0], p[1], p[2]])
                .collect(),
            tets: self.sim.model.mesh.tets.clone(),
        };
        PyMesh::from_tet_mesh(py, &mesh, Vec::new())
    }

    /// The vertices each pin holds: one int64 array per pin, in scene order.
    #[getter]
    fn pins<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyArray1<i64>>> {
        self.sim
            .model
            .pins
            .iter()
            .map(|p| PyArray1::from_vec(py, p.vertices.iter().map(|&v| v as i64).collect()))
            .collect()
    }

    /// Where pin `pin` holds its vertices at time `t` (s; default: the end of the next step),
    /// (k, 3) float64 in m, in `pins[pin]` order.
    #[pyo3(signature = (pin, t=None))]
    fn pin_targets<'py>(
        &self,
        py: Python<'py>,
        pin: usize,
        t: Option<f64>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.pin(pin)?;
        let t = t.unwrap_or(self.sim.state.t + self.sim.h);
        let targets = self.sim.pin_targets(pin, t).unwrap_or_default();
        let flat: Vec<f64> = targets.iter().flatten().copied().collect();
        rows3(py, &flat)
    }

    /// Drives pin `pin` from Python: from the next step on its vertices end every step at
    /// `targets` ((k, 3) m, in `pins[pin]` order) until set again; the pin's scripted motion is
    /// replaced (see `Simulation::set_pin_targets` in the Rust docs).
    fn set_pin_targets(&mut self, pin: usize, targets: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.pin(pin)?.vertices.len();
        let flat = as_rows::<f64>(targets, "float64", 3, "targets")?;
        let ro = flat.readonly();
        let rows: Vec<[f64; 3]> = ro
            .as_slice()?
            .chunks_exact(3)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        if rows.len() != k {
            return Err(invalid(format!(
                "targets: pin {pin} holds {k} vertices, got {} row(s)",
                rows.len()
            )));
        }
        self.sim.set_pin_targets(pin, &rows).map_err(py_err)
    }

    /// Starts recording the steps taken from now on for exact gradients and returns the
    /// `Tape` (`Tape.backward`). The current state is the tape's first, numbered as
    /// `step_count` is now (0 for a fresh simulation); a new `record()` replaces the old
    /// recording. Raises ValueError for a static solve (nothing to differentiate) or a scene
    /// the adjoint does not differentiate (strain limits).
    ///
    /// `checkpointing` trades memory for time: `"all"` (default) keeps every state (memory
    /// grows with the steps, `backward` re-solves nothing); `"every"` keeps every `k`-th state
    /// (memory ~ steps/k + k states, each step re-solved once in `backward`: k ≈ √steps holds
    /// the fewest); `"binomial"` keeps `k` snapshots on Griewank's binomial schedule (memory
    /// ~ k states whatever the length, each step re-solved about r times where
    /// C(k + r, k) ≥ steps). The states not kept are re-solved by f64 Newton to `tolerance`
    /// (CN, default 1e-10) with each step's pins where the simulation held them; they agree
    /// with the simulation's own states to the solvers' tolerances (bit for bit when the
    /// scene's solver is Newton with `stop = "cn"` at the same tolerance), and the gradient is
    /// exact to that order.
    #[pyo3(signature = (checkpointing="all", k=None, tolerance=1e-10))]
    fn record(&mut self, checkpointing: &str, k: Option<usize>, tolerance: f64) -> PyResult<PyTape> {
        if self.sim.static_increments.is_some() {
            return Err(PyValueError::new_err(
                "record(): a static solve (load increments) has no dynamics to differentiate",
            ));
        }
        let need_k = |mode: &str| {
            k.filter(|&k| k >= 1).ok_or_else(|| {
                value_error(format!(
                    "record(): checkpointing=\"{mode}\" needs k ≥ 1 (got {k:?})"
                ))
            })
        };
        let checkpointing = match checkpointing {
            "all" => Checkpointing::All,
            "every" => Checkpointing::Every(need_k("every")?),
            "binomial" => Checkpointing::Binomial(need_k("binomial")?),
            other => {
                return Err(value_error(format!(
                    "record(): checkpointing: expected \"all\", \"every\" or \"binomial\", got {other:?}"
                )))
            }
        };
        let options = RecordOptions {
            checkpointing,
            tolerance,
            ..RecordOptions::default()
        };
        let tape = Tape::observing_with(
            self.sim.model.clone(),
            self.sim.state.clone(),
            self.sim.h,
            options,
        )
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let tape = Rc::new(RefCell::new(tape));
        let rec = tape.clone();
        self.sim
            .set_observer(Some(Box::new(move |s: &jello::sim::ObservedStep<'_>| {
                rec.borrow_mut().observe(s)
            })));
        Ok(PyTape {
            tape,
            first: self.sim.steps,
            stats: RefCell::new(None),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "jello.Simulation({} vertices, solver {}, backend {}, step {}, t = {} s)",
            self.sim.model.num_vertices(),
            self.sim.solver_name(),
            self.backend,
            self.sim.steps,
            self.sim.state.t
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Free functions

/// The GPU adapters wgpu sees (honouring `WGPU_BACKEND`), as `jello info` lists them: one dict
/// per adapter with `name`, `backend` (graphics API), `device_type`, `driver`, `limits` (the
/// ones jello checks) and `description` (`jello info`'s text).
#[pyfunction]
fn adapters(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = py.detach(jello::gpu::list_adapters);
    let out = PyList::empty(py);
    for a in &list.0 {
        let d = PyDict::new(py);
        d.set_item("name", &a.info.name)?;
        d.set_item("backend", &a.info.backend)?;
        d.set_item("device_type", &a.info.device_type)?;
        d.set_item("driver", &a.info.driver)?;
        let l = PyDict::new(py);
        l.set_item(
            "max_storage_buffers_per_shader_stage",
            a.limits.max_storage_buffers_per_shader_stage,
        )?;
        l.set_item(
            "max_storage_buffer_binding_size",
            a.limits.max_storage_buffer_binding_size,
        )?;
        l.set_item("max_buffer_size", a.limits.max_buffer_size)?;
        l.set_item(
            "max_compute_invocations_per_workgroup",
            a.limits.max_compute_invocations_per_workgroup,
        )?;
        l.set_item(
            "max_compute_workgroups_per_dimension",
            a.limits.max_compute_workgroups_per_dimension,
        )?;
        d.set_item("limits", l)?;
        d.set_item("description", a.to_string())?;
        out.append(d)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Adjoint

/// A simulation's recorded steps (`Simulation.record()`), differentiated by `backward`.
#[pyclass(name = "Tape", module = "jello", unsendable)]
struct PyTape {
    tape: Rc<RefCell<Tape>>,
    /// The simulation's step count when the recording began: the tape's state 0.
    first: usize,
    /// What the last backward pass cost.
    stats: RefCell<Option<BackwardStats>>,
}

/// A `ValueError` carrying `msg`.
fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

impl PyTape {
    /// `{step: (n, 3) array}` as per-tape-step flat arrays; `what` names the argument.
    fn seeds(
        &self,
        obj: Option<&Bound<'_, PyAny>>,
        what: &str,
        n: usize,
        steps: usize,
    ) -> PyResult<BTreeMap<usize, Vec<f64>>> {
        let mut out = BTreeMap::new();
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(out);
        };
        let dict = obj.cast::<PyDict>().map_err(|_| {
            value_error(format!(
                "{what} must be a dict mapping a step number to an (n, 3) array"
            ))
        })?;
        let (first, last) = (self.first, self.first + steps);
        for (k, v) in dict.iter() {
            let k: i64 = k
                .extract()
                .map_err(|_| value_error(format!("{what}: keys are step numbers (int)")))?;
            if k < first as i64 || k > last as i64 {
                return Err(value_error(format!(
                    "{what}: step {k} was not recorded: the tape holds steps {first}..={last}"
                )));
            }
            let rows = finite_rows3(&v, n, &format!("{what}[{k}]"))
                .map_err(|e| value_error(e.value(obj.py()).to_string()))?;
            out.insert(k as usize - first, rows);
        }
        Ok(out)
    }
}

#[pymethods]
impl PyTape {
    /// dL/d(`wrt`) of a loss L whose gradients on the recorded states are `dx` and `dv`:
    /// dicts mapping a step number (as `Simulation.step()` reports it; the first recorded
    /// state is the step count at `record()`, 0 for a fresh simulation) to an (n, 3) array of
    /// dL/dx ([L]/m) or dL/dv ([L]·s/m). Returns a dict of numpy arrays, one per name in
    /// `wrt`: `initial_positions` (n, 3) [L]/m, `initial_velocities` (n, 3) [L]·s/m,
    /// `youngs_modulus`, `mu`, `lambda` (per tet, [L]/Pa), `poisson_ratio` (per tet, [L]),
    /// `density` (per tet, [L]·m³/kg), `pin_targets` (steps + 1, pinned vertices, 3) [L]/m
    /// (row s: the targets at the end of recorded step s, row 0 zero; vertices in
    /// `Simulation.pins` order), `forces` (steps, n, 3) [L]/N (row s: a force acting from
    /// recorded step s to s + 1), `contact_stiffness` (float, [L]·m⁴/J; a fixed IPC κ). With
    /// `unconverged="flag"` steps that did not converge are differentiated anyway and listed
    /// under `unconverged_steps`; the default "refuse" raises. The GIL is released while it
    /// runs. Bad requests (a step not recorded, an unknown or inapplicable parameter, an
    /// unconverged step, a record broken by setting the state between steps) raise ValueError.
    #[pyo3(signature = (dx, dv=None, wrt=None, unconverged="refuse"))]
    fn backward<'py>(
        &self,
        py: Python<'py>,
        dx: &Bound<'py, PyAny>,
        dv: Option<&Bound<'py, PyAny>>,
        wrt: Option<Vec<String>>,
        unconverged: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (n, nt, steps, pinned) = {
            let t = self.tape.borrow();
            let m = t.model();
            let pinned: usize = m.pins.iter().map(|p| p.vertices.len()).sum();
            (m.num_vertices(), m.mesh.num_tets(), t.steps(), pinned)
        };
        let names = wrt.unwrap_or_else(|| {
            [
                "initial_positions",
                "initial_velocities",
                "youngs_modulus",
                "poisson_ratio",
                "density",
            ]
            .map(String::from)
            .to_vec()
        });
        let mut params = Vec::new();
        for name in &names {
            let p = Param::parse(name).ok_or_else(|| {
                let all: Vec<&str> = Param::ALL.iter().map(|p| p.name()).collect();
                value_error(format!(
                    "unknown parameter `{name}`: expected one of {}",
                    all.join(", ")
                ))
            })?;
            params.push(p);
        }
        let mode = match unconverged {
            "refuse" => Unconverged::Refuse,
            "flag" => Unconverged::Flag,
            other => {
                return Err(value_error(format!(
                    "unconverged: expected \"refuse\" or \"flag\", got {other:?}"
                )))
            }
        };
        let seeds = Seeds {
            x: self.seeds(Some(dx), "dx", n, steps)?,
            v: self.seeds(dv, "dv", n, steps)?,
        };
        let tape = SameThread(self.tape.clone());
        let result = py
            .detach(move || {
                let tape = tape.into_inner();
                let r = tape.borrow_mut().backward(&seeds, &params, mode);
                SameThread(r)
            })
            .into_inner();
        let (g, stats) = result.map_err(|e| match e {
            Error::Invalid(m) => value_error(m),
            other => py_err(other),
        })?;
        *self.stats.borrow_mut() = Some(stats);
        let out = PyDict::new(py);
        let per_tet = |v: &Option<Vec<f64>>| -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
            Ok(v.as_ref().map(|v| {
                debug_assert_eq!(v.len(), nt);
                PyArray1::from_slice(py, v)
            }))
        };
        let stack = |rows: &[Vec<f64>], k: usize| -> PyResult<Bound<'py, PyAny>> {
            let flat: Vec<f64> = rows.iter().flatten().copied().collect();
            Ok(PyArray1::from_vec(py, flat)
                .reshape([rows.len(), k, 3])?
                .into_any())
        };
        if let Some(v) = &g.initial_positions {
            out.set_item("initial_positions", rows3(py, v)?)?;
        }
        if let Some(v) = &g.initial_velocities {
            out.set_item("initial_velocities", rows3(py, v)?)?;
        }
        for (name, v) in [
            ("mu", &g.mu),
            ("lambda", &g.lambda),
            ("youngs_modulus", &g.youngs_modulus),
            ("poisson_ratio", &g.poisson_ratio),
            ("density", &g.density),
        ] {
            if let Some(a) = per_tet(v)? {
                out.set_item(name, a)?;
            }
        }
        if let Some(p) = &g.pin_targets {
            out.set_item("pin_targets", stack(p, pinned)?)?;
        }
        if let Some(f) = &g.forces {
            out.set_item("forces", stack(f, n)?)?;
        }
        if let Some(k) = g.contact_stiffness {
            out.set_item("contact_stiffness", k)?;
        }
        if mode == Unconverged::Flag {
            let first = self.first;
            let flagged: Vec<usize> = g.unconverged_steps.iter().map(|s| s + first).collect();
            out.set_item("unconverged_steps", flagged)?;
        }
        Ok(out)
    }

    /// What the last `backward` cost, or None before the first: `backward_ms` (wall time,
    /// re-solved steps included), `recomputed_steps` (steps re-solved from checkpoints),
    /// `peak_states` (the most states held at once, kept ones included) and
    /// `peak_state_bytes` (their size: positions, velocities and BDF2 history, f64).
    #[getter]
    fn last_backward<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = *self.stats.borrow() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("backward_ms", s.backward_ms)?;
        d.set_item("recomputed_steps", s.recomputed_steps)?;
        d.set_item("peak_states", s.peak_states)?;
        d.set_item("peak_state_bytes", s.peak_state_bytes)?;
        Ok(Some(d))
    }

    /// Steps recorded so far.
    #[getter]
    fn steps(&self) -> usize {
        self.tape.borrow().steps()
    }

    /// The step number of the tape's first state (`Simulation.step_count` at `record()`).
    #[getter]
    fn first_step(&self) -> usize {
        self.first
    }

    fn __repr__(&self) -> String {
        format!(
            "Tape(steps {}..={})",
            self.first,
            self.first + self.tape.borrow().steps()
        )
    }
}

/// Reads a run's `checkpoint.bin` (the exact state `jello run` keeps at its last frame): a
/// dict with `step`, `time` (s), `positions` (n, 3) m and `velocities` (n, 3) m/s.
#[pyfunction]
fn read_checkpoint<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let c = py
        .detach(|| Checkpoint::read(Path::new(&path)))
        .map_err(py_err)?;
    let d = PyDict::new(py);
    d.set_item("step", c.header.step)?;
    d.set_item("time", c.t)?;
    d.set_item("positions", rows3(py, &c.x)?)?;
    d.set_item("velocities", rows3(py, &c.v)?)?;
    Ok(d)
}

/// The compiled half of the `jello` package.
#[pymodule]
fn _jello(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("JelloError", py.get_type::<JelloError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("SolverError", py.get_type::<SolverError>())?;
    m.add("GpuError", py.get_type::<GpuError>())?;
    m.add_class::<PyScene>()?;
    m.add_class::<PyMesh>()?;
    m.add_class::<PySimulation>()?;
    m.add_class::<PyTape>()?;
    m.add_function(wrap_pyfunction!(read_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(adapters, m)?)?;
    m.add_function(wrap_pyfunction!(read_checkpoint, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
