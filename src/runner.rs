//! Headless runs: build the solver a scene asks for, step, write frames and `stats.json`.

use crate::error::{JelloError, Result};
use crate::output::{atomic_write, FrameOptions, FrameWriter, RunStats, StepStats};
use crate::problem::Model;
use crate::scene::{BuiltScene, RunConfig};
use crate::sim::Simulation;
use crate::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver, StopRule};
use std::path::{Path, PathBuf};

/// What a run writes.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Output directory (`frames/`, `stats.json`); `None` writes nothing.
    pub out_dir: Option<PathBuf>,
    /// Record per-iteration residual and energy.
    pub trace: bool,
}

/// Builds the solver named in `config` for `model`.
pub fn make_solver(config: &RunConfig, model: &Model) -> Result<Box<dyn StepSolver>> {
    match config.solver.as_str() {
        "newton" => {
            let params = NewtonParams {
                stop: config.stop,
                max_iterations: config.max_iterations.unwrap_or(100),
                ..NewtonParams::default()
            };
            Ok(Box::new(NewtonSolver::new(model, params)?))
        }
        other => Err(JelloError::Invalid(format!(
            "solver `{other}` is not available in this build"
        ))),
    }
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
    let solver = make_solver(&config, &built.model)?;
    let state = built.model.initial_state(&built.velocity);
    let mut sim = Simulation::new(built.model, state, config.h, solver)?;
    let (stop, tolerance) = match config.stop {
        StopRule::Cn { eps } => ("cn", eps),
        StopRule::Dx { tol } => ("dx", tol),
    };
    let mut stats = RunStats {
        scene: scene_path.display().to_string(),
        solver: sim.solver_name(),
        stop: stop.into(),
        tolerance,
        backend: "cpu".into(),
        adapter: None,
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
    if let Some(f) = frames.as_mut() {
        f.write(0, 0.0, &sim.model.mesh, &sim.state.x, &sim.state.v)?;
    }
    for step in 1..=config.steps {
        let report = sim.step(opts.trace)?;
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
            }
            write_stats(&stats)?;
        }
    }
    write_stats(&stats)?;
    Ok((sim, stats))
}
