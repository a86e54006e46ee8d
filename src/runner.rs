//! Headless runs: build the solver a scene asks for, step, write frames and `stats.json`.

use crate::error::{JelloError, Result};
use crate::gpu::{Backend, Device};
use crate::output::{atomic_write, FrameOptions, FramePainter, FrameWriter, RunStats, StepStats};
use crate::problem::{DeviceElastic, ElasticTerms, Model};
use crate::scene::{BuiltScene, RunConfig};
use crate::sim::Simulation;
use crate::solver::jgs2::{
    load_or_build, DeviceJgs2, Jgs2Params, Jgs2Solver, Jgs2Subspace, SubspaceOptions,
    SubspaceOrigin, Variant,
};
use crate::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver, StopRule};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a run writes.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Output directory (`frames/`, `stats.json`); `None` writes nothing.
    pub out_dir: Option<PathBuf>,
    /// Record per-iteration residual and energy.
    pub trace: bool,
    /// Where element work runs: `Cpu` = the f64 reference, `Gpu` = wgpu kernels (error when no
    /// adapter), `Auto` = GPU when an adapter exists, else the f64 CPU path.
    pub backend: Backend,
}

/// The elastic-term evaluator for `backend`: `None` means the model's own f64 CPU path.
/// Returns the evaluator and the adapter description (None on the CPU).
pub fn elastic_backend(
    model: &Model,
    backend: Backend,
) -> Result<(Option<DeviceElastic>, Option<String>)> {
    match backend {
        Backend::Cpu => Ok((None, None)),
        Backend::Gpu => {
            let d = DeviceElastic::new(model, Backend::Gpu)?;
            let name = d.backend_name();
            Ok((Some(d), Some(name)))
        }
        Backend::Auto => match DeviceElastic::new(model, Backend::Gpu) {
            Ok(d) => {
                let name = d.backend_name();
                Ok((Some(d), Some(name)))
            }
            Err(e) => {
                log::info!("no GPU adapter ({e}); running on the CPU");
                Ok((None, None))
            }
        },
    }
}

/// Builds the solver named in `config` for `model`.
pub fn make_solver(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
) -> Result<Box<dyn StepSolver>> {
    match config.solver.as_str() {
        "newton" => {
            let params = NewtonParams {
                stop: config.stop,
                max_iterations: config.max_iterations.unwrap_or(100),
                ..NewtonParams::default()
            };
            Ok(Box::new(NewtonSolver::new(model, params)?))
        }
        "vbd" | "jgs2" => {
            let params = jgs2_params(config);
            if config.solver == "vbd" {
                return Ok(Box::new(Jgs2Solver::vbd(model, params)));
            }
            let subspace = load_or_build_subspace(model, config.h, &config.subspace, cache_dir)?;
            Ok(Box::new(Jgs2Solver::jgs2(model, params, subspace)?))
        }
        other => Err(JelloError::Invalid(format!(
            "solver `{other}` is not available in this build"
        ))),
    }
}

/// JGS2 / VBD parameters of `config`: Jacobi by default for `jgs2`, Gauss–Seidel for `vbd`
/// (its published form: no safeguard).
fn jgs2_params(config: &RunConfig) -> Jgs2Params {
    let variant = match (config.variant.as_deref(), config.solver.as_str()) {
        (Some("jacobi"), _) | (None, "jgs2") => Variant::Jacobi,
        _ => Variant::GaussSeidel,
    };
    Jgs2Params {
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        variant,
        // VBD as published: its local Newton steps on the exact local energy need no
        // safeguard.
        safeguard: config.solver == "jgs2",
    }
}

/// The JGS2 subspace for `model` at time step `h` (shared by the Jacobi and Gauss–Seidel
/// variants): read from `cache_dir` when a valid artifact with the same key is there, else
/// built (and written there when a directory is given).
pub fn load_or_build_subspace(
    model: &Model,
    h: f64,
    opts: &SubspaceOptions,
    cache_dir: Option<&Path>,
) -> Result<Arc<Jgs2Subspace>> {
    let (sub, origin, warnings) = load_or_build(model, h, opts, cache_dir)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if let SubspaceOrigin::Built(p) = origin {
        let s = &sub.stats;
        eprintln!(
            "jgs2 precompute: {:.2} s (factor {:.2}, basis {:.2}, eigen {:.2}, cubature {:.2}), {:.0} B/vertex{}",
            s.total_s,
            s.factor_s,
            s.basis_s,
            s.eigen_s,
            s.cubature_s,
            s.bytes_per_vertex,
            p.map(|p| format!(", cached at {}", p.display())).unwrap_or_default()
        );
    }
    Ok(Arc::new(sub))
}

/// A simulation ready to step on the requested backend, and the adapter that runs it (`None`
/// on the CPU).
pub struct Setup {
    /// The simulation.
    pub sim: Simulation,
    /// The GPU adapter's description, or `None` when everything runs on the CPU.
    pub adapter: Option<String>,
}

/// Builds the simulation of `built` on `backend`:
/// - `newton`: the f64 solver; with a GPU its gradients and element Hessians come from the
///   WGSL kernels ([`DeviceElastic`]), the Cholesky and line-search energies stay on the CPU.
/// - `jgs2` / `vbd`: on a GPU the whole iteration runs on the device ([`DeviceJgs2`], f32);
///   on the CPU the f64 reference ([`Jgs2Solver`]).
///
/// `Cpu` never touches a GPU; `Gpu` errors without an adapter; `Auto` takes a GPU adapter when
/// one exists, else the CPU.
pub fn setup(built: &BuiltScene, backend: Backend, cache_dir: Option<&Path>) -> Result<Setup> {
    let config = &built.config;
    let model = &built.model;
    let state = model.initial_state(&built.velocity);
    if matches!(config.solver.as_str(), "jgs2" | "vbd") && backend != Backend::Cpu {
        let device = match (backend, Device::new(Backend::Gpu)) {
            (_, Ok(d)) => Some(d),
            (Backend::Gpu, Err(e)) => return Err(e),
            (_, Err(e)) => {
                log::info!("no GPU adapter ({e}); running on the CPU");
                None
            }
        };
        if let Some(device) = device {
            let adapter = device.info().to_string();
            let params = jgs2_params(config);
            let subspace = (config.solver == "jgs2")
                .then(|| load_or_build_subspace(model, config.h, &config.subspace, cache_dir))
                .transpose()?;
            match DeviceJgs2::new(device, model, params, subspace) {
                Ok(solver) => {
                    let sim = Simulation::new(model.clone(), state, config.h, Box::new(solver))?;
                    return Ok(Setup {
                        sim,
                        adapter: Some(adapter),
                    });
                }
                Err(e) if backend == Backend::Gpu => return Err(e),
                // `auto`: a device that cannot hold this model (e.g. a subspace larger than a
                // storage binding) falls back to the CPU reference, with a warning.
                Err(e) => eprintln!("warning: {e}; running {} on the CPU", config.solver),
            }
        }
        let solver = make_solver(config, model, cache_dir)?;
        let sim = Simulation::new(model.clone(), state, config.h, solver)?;
        return Ok(Setup { sim, adapter: None });
    }
    let solver = make_solver(config, model, cache_dir)?;
    let (device, adapter) = match config.solver.as_str() {
        "newton" => elastic_backend(model, backend)?,
        _ => (None, None),
    };
    let mut sim = Simulation::new(model.clone(), state, config.h, solver)?;
    if let Some(d) = device {
        sim.set_elastic_backend(Box::new(d));
    }
    Ok(Setup { sim, adapter })
}

/// Runs a built scene to completion. `on_step(step, report)` is called after each step (for
/// progress display). Frames go to `out_dir/frames`, statistics to `out_dir/stats.json`
/// (rewritten after every frame, so an interrupted run leaves a valid file).
pub fn run(
    scene_path: &Path,
    built: BuiltScene,
    opts: &RunOptions,
    mut on_step: impl FnMut(usize, &StepReport),
) -> Result<(Simulation, RunStats)> {
    let config = built.config.clone();
    let cache_dir = scene_path.parent().map(|d| d.join(".jello-cache"));
    let Setup { mut sim, adapter } = setup(&built, opts.backend, cache_dir.as_deref())?;
    drop(built);
    let (stop, tolerance) = match config.stop {
        StopRule::Cn { eps } => ("cn", eps),
        StopRule::Dx { tol } => ("dx", tol),
    };
    let mut stats = RunStats {
        scene: scene_path.display().to_string(),
        solver: sim.solver_name(),
        stop: stop.into(),
        tolerance,
        backend: if adapter.is_some() {
            "gpu".into()
        } else {
            "cpu".into()
        },
        adapter,
        vertices: sim.model.num_vertices(),
        tets: sim.model.mesh.num_tets(),
        h: config.h,
        converged_steps: 0,
        total_iterations: 0,
        total_wall_ms: 0.0,
        steps: Vec::with_capacity(config.steps),
    };
    let mut frames = opts.out_dir.as_ref().map(|d| {
        FrameWriter::new(
            d,
            &sim.model.mesh,
            FrameOptions {
                vtu: config.output.vtu,
                obj: config.output.obj,
            },
        )
    });
    let write_stats = |stats: &RunStats| -> Result<()> {
        if let Some(d) = &opts.out_dir {
            let json =
                serde_json::to_vec_pretty(stats).map_err(|e| JelloError::Invalid(e.to_string()))?;
            atomic_write(&d.join("stats.json"), &json)?;
        }
        Ok(())
    };
    let painter = match (&opts.out_dir, config.output.png) {
        (Some(_), true) => Some(FramePainter::new(
            &sim.model,
            (config.output.png_size[0], config.output.png_size[1]),
            opts.backend != Backend::Cpu,
        )?),
        _ => None,
    };
    let paint = |index: usize, x: &[f64]| -> Result<()> {
        if let (Some(p), Some(d)) = (&painter, &opts.out_dir) {
            p.paint(x, &d.join("frames").join(format!("frame_{index:05}.png")))?;
        }
        Ok(())
    };
    if let Some(f) = frames.as_mut() {
        f.write(0, 0.0, &sim.model.mesh, &sim.state.x, &sim.state.v)?;
        paint(0, &sim.state.x)?;
    }
    for step in 1..=config.steps {
        let report = sim.step(opts.trace)?;
        for w in &report.warnings {
            eprintln!("warning: {w}");
        }
        on_step(step, &report);
        stats.total_iterations += report.iterations;
        stats.total_wall_ms += report.wall_ms;
        stats.converged_steps += report.converged as usize;
        stats.steps.push(StepStats::new(step, sim.state.t, report));
        if step % config.output.every == 0 || step == config.steps {
            if let Some(f) = frames.as_mut() {
                f.write(
                    step,
                    sim.state.t,
                    &sim.model.mesh,
                    &sim.state.x,
                    &sim.state.v,
                )?;
                paint(step, &sim.state.x)?;
            }
            write_stats(&stats)?;
        }
    }
    write_stats(&stats)?;
    Ok((sim, stats))
}
