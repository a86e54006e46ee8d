//! Headless runs: build the solver a scene asks for, step, and keep a run directory.
//!
//! # The run directory
//! A run owns its output directory ([`RunOptions::out_dir`]):
//! - `manifest.json` ([`Manifest`]): scene and its hash, solver, backend (and why), requested
//!   and completed steps, status `running | complete | failed | interrupted`, the last step
//!   whose frame and checkpoint are on disk, the frames and every file the run wrote. Written
//!   atomically at the start, around every frame and at the end.
//! - `frames/` (`frame_NNNNN.vtu` + `sim.pvd`, optional `.obj`/`.png`), `stats.json`
//!   ([`RunStats`]), and `checkpoint.bin` ([`Checkpoint`]: the exact state at the last frame).
//!
//! A directory holding another run's outputs (a manifest, or jello's files without one) is
//! refused unless [`RunOptions::overwrite`], which removes exactly the files the old manifest
//! lists (or, without a manifest, the files named like jello's outputs) and leaves every other
//! file alone, saying so. [`RunOptions::resume`] continues the directory's run from its
//! checkpoint instead (same scene settings, solver and backend; see [`RunIdentity`]).
//!
//! Nothing is written before the set-up succeeds, so a run that fails early (no adapter, a bad
//! subspace) leaves the directory as it was. A solver error mid-run marks the run `failed` (with
//! the message) and keeps the last good frame, checkpoint and stats; a set cancellation flag
//! ([`RunOptions::cancel`], checked between steps) finishes the current step's writes, writes a
//! frame and checkpoint of that step, and marks the run `interrupted`.

pub mod auto;
pub mod capabilities;
mod identity;
mod outputs;
mod residual;
mod setup;

pub use identity::{scene_hash, scene_key};
pub use residual::{
    step_problem, vertex_residuals, ResidualField, ResidualProbe, MAX_RESIDUAL_ITERATION,
};
pub use setup::{
    dot_params, load_or_build_subspace, load_partition, make_solver, multilevel_params, setup,
    setup_on, setup_with_device, Setup,
};

use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::gpu::{Backend, BackendChoice};
use crate::output::run_dir::{self, DirState, CHECKPOINT, STATS};
use crate::output::{Checkpoint, Manifest, RunIdentity, RunStats, RunStatus, StepStats};
use crate::scene::{BuiltScene, RunConfig};
use crate::sim::Simulation;
use crate::solver::StepReport;
use outputs::{dir_error, ms, RunInfo, RunWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The most steps a run may ask for. Nothing is allocated per requested step; the cap keeps step
/// indices, frame names and totals far inside every integer type (1e9 steps at 1 ms each is
/// eleven days).
pub use crate::limits::MAX_STEPS;

/// What a run writes and how it starts.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Output directory (see the module docs); `None` writes nothing.
    pub out_dir: Option<PathBuf>,
    /// Record per-iteration residual and energy.
    pub trace: bool,
    /// Where element work runs: `Cpu` = the f64 reference, `Gpu` = wgpu kernels (error when no
    /// adapter; software adapters accepted), `Auto` = a hardware GPU when one exists, else the
    /// f64 CPU path (see [`Backend::resolve`]). On a resume, `Auto` continues on the
    /// checkpoint's backend.
    pub backend: Backend,
    /// Replace an earlier run in `out_dir`: remove the files its manifest lists, nothing else.
    pub overwrite: bool,
    /// Continue the run in `out_dir` from its checkpoint.
    pub resume: bool,
    /// When set (e.g. by a SIGINT handler), the run stops before its next step, after writing a
    /// frame and checkpoint of the last one, with status `interrupted`.
    pub cancel: Option<Arc<AtomicBool>>,
    /// `Some(K)`: colour every PNG frame after frame 0 by the per-vertex residual ‖∇E‖ (N) of
    /// the step that produced it, re-solved from that step's start with K iterations
    /// ([`ResidualProbe`]), drawn at the iterate it stopped at; frame 0 keeps the plain
    /// shading. Needs PNG output (`[output] png` or `--png`); K in
    /// 1..=[`MAX_RESIDUAL_ITERATION`].
    pub residual_iteration: Option<usize>,
}

/// What a resumed run starts from.
struct Resume {
    checkpoint: Checkpoint,
    manifest: Manifest,
    /// `stats.json`'s steps as read.
    earlier: Vec<serde_json::Value>,
}

/// A run set up and ready to step: the output directory checked (and an old run removed when
/// overwriting), the backend chosen, the solver built, a checkpoint loaded when resuming.
pub struct Run {
    scene_path: PathBuf,
    config: RunConfig,
    opts: RunOptions,
    sim: Simulation,
    choice: BackendChoice,
    identity: RunIdentity,
    scene_hash: String,
    setup_ms: f64,
    resume: Option<Resume>,
    notes: Vec<String>,
    residual: Option<ResidualProbe>,
    auto: Option<auto::Pick>,
}

/// Runs a built scene to completion (or interruption): [`Run::prepare`] then [`Run::execute`].
/// `on_step(step, report)` is called after each step (for progress display).
pub fn run(
    scene_path: &Path,
    built: BuiltScene,
    opts: &RunOptions,
    on_step: impl FnMut(usize, &StepReport),
) -> Result<(Simulation, RunStats)> {
    Run::prepare(scene_path, built, opts)?.execute(on_step)
}

impl Run {
    /// Checks the output directory, chooses the backend, builds the simulation and, when
    /// resuming, restores the checkpoint's state. Writes nothing except, with
    /// [`RunOptions::overwrite`], removing the old run's files once the set-up has succeeded.
    pub fn prepare(scene_path: &Path, built: BuiltScene, opts: &RunOptions) -> Result<Run> {
        let config = built.config.clone();
        if config.steps == 0 || config.steps > MAX_STEPS {
            return Err(JelloError::Invalid(format!(
                "`simulation.steps` (or --steps): {} is outside 1..={MAX_STEPS}",
                config.steps
            )));
        }
        if opts.resume && opts.overwrite {
            return Err(JelloError::Invalid(
                "--resume continues a run and --overwrite replaces it: pass one".into(),
            ));
        }
        let dir = opts.out_dir.as_deref();
        if dir.is_none() && (opts.resume || opts.overwrite) {
            return Err(JelloError::Invalid(
                "--resume and --overwrite need an output directory".into(),
            ));
        }
        if opts.residual_iteration.is_some() && !config.output.png {
            return Err(JelloError::Invalid(
                "--residual-iteration colours the PNG frames: pass --png (or set `output.png = \
                 true` in the scene)"
                    .into(),
            ));
        }
        let scene_hash = scene_hash(scene_path)?;
        let key = scene_key(scene_path, &built.model)?;
        let mut notes = Vec::new();

        // 1. The output directory: free, refused, to be replaced, or resumed.
        let mut resume = None;
        let mut replace: Option<Vec<String>> = None;
        if let Some(dir) = dir {
            match run_dir::inspect(dir)? {
                DirState::Free if opts.resume => {
                    return Err(dir_error(
                        dir,
                        "--resume: no run to resume here (no manifest.json)",
                    ))
                }
                DirState::Free => {}
                DirState::Unowned { why, .. } if opts.resume => {
                    return Err(dir_error(
                        dir,
                        format!(
                        "--resume: jello outputs without a run manifest ({why}); nothing to resume"
                    ),
                    ))
                }
                DirState::Unowned { files, why } => {
                    if !opts.overwrite {
                        return Err(dir_error(
                            dir,
                            format!(
                                "holds jello outputs without a run manifest ({}{}; {why}); \
                                 use --overwrite to replace them",
                                files[..files.len().min(3)].join(", "),
                                if files.len() > 3 { ", ..." } else { "" }
                            ),
                        ));
                    }
                    replace = Some(files);
                }
                DirState::Run(m) => {
                    if m.writer_alive() {
                        return Err(dir_error(
                            dir,
                            format!(
                                "a jello (pid {}) is still writing this run; stop it first",
                                m.pid
                            ),
                        ));
                    }
                    if opts.resume {
                        resume = Some(load_resume(dir, *m, &config, &built.model, &key)?);
                    } else if opts.overwrite {
                        replace = Some(m.files);
                    } else {
                        return Err(dir_error(
                            dir,
                            format!(
                                "holds another run ({}, {}, step {} of {}); use --resume to \
                                 continue it or --overwrite to replace it",
                                m.scene, m.status, m.last_complete_step, m.requested_steps
                            ),
                        ));
                    }
                }
            }
        }

        // 2. The backend: a resume with `auto` continues on the checkpoint's, an explicit one
        // must be it.
        if let (Some(r), Some(dir)) = (&resume, dir) {
            let was = r.checkpoint.header.identity.backend.as_str();
            let asked = match opts.backend {
                Backend::Cpu => Some("cpu"),
                Backend::Gpu => Some("gpu"),
                Backend::Auto => None,
            };
            if asked.is_some_and(|a| a != was) {
                return Err(dir_error(
                    dir,
                    format!(
                        "--resume: the checkpoint ran on the {was} backend, not {}; pass \
                         --backend {was} (or auto), or use --overwrite to start again",
                        opts.backend
                    ),
                ));
            }
        }
        let (requested, adopted) = match (&resume, opts.backend) {
            (Some(r), Backend::Auto) => match r.checkpoint.header.identity.backend.as_str() {
                "gpu" => (Backend::Gpu, true),
                _ => (Backend::Cpu, true),
            },
            _ => (opts.backend, false),
        };
        let mut choice = requested.resolve()?;
        if adopted {
            choice.reason = match choice.reason.as_str() {
                "requested" => "continuing the checkpoint's backend".into(),
                r => format!("continuing the checkpoint's backend; {r}"),
            };
        }

        // 3. The simulation.
        let t0 = Instant::now();
        let cache_dir = scene_path.parent().map(|d| d.join(".jello-cache"));
        let setup = setup_on(&built, choice, cache_dir.as_deref())?;
        // The pick is the run's solver from here on (its identity, the residual probe's twin).
        let mut config = config;
        if let Some(p) = &setup.auto {
            config.solver = p.solver;
            config.auto_solver = false;
        }
        let residual = opts
            .residual_iteration
            .map(|k| ResidualProbe::new(&config, &built.model, cache_dir.as_deref(), k))
            .transpose()?;
        let setup_ms = ms(t0);
        drop(built);
        let mut sim = setup.sim;
        let choice = setup.choice;
        let auto = setup.auto;
        let identity = identity::identity(&config, key, &choice);

        // 4. Resume: same backend, then the state.
        if let Some(r) = &resume {
            let was = &r.checkpoint.header.identity;
            if was.backend != identity.backend {
                return Err(dir_error(
                    dir.expect("resume has a directory"),
                    format!(
                        "--resume: the checkpoint ran on the {} backend, this run is on the {} \
                         ({}); pass --backend {} or use --overwrite to start again",
                        was.backend, identity.backend, choice.reason, was.backend
                    ),
                ));
            }
            if was.adapter != identity.adapter {
                notes.push(format!(
                    "resuming on adapter {} (the checkpoint ran on {}): the trajectory continues \
                     within the GPU tolerance, not bit for bit",
                    identity.adapter.as_deref().unwrap_or("none"),
                    was.adapter.as_deref().unwrap_or("none")
                ));
            }
            let c = &r.checkpoint;
            if c.x.len() != sim.state.x.len() {
                return Err(JelloError::Invalid(format!(
                    "--resume: the checkpoint holds {} values, the model has {}",
                    c.x.len(),
                    sim.state.x.len()
                )));
            }
            if sim.model.integrator.keeps_history() && c.header.step > 0 && c.history.is_none() {
                return Err(dir_error(
                    dir.expect("resume has a directory"),
                    format!(
                        "--resume: the checkpoint of step {} holds no previous state, which \
                         `integrator = \"{}\"` needs; use --overwrite to start again",
                        c.header.step,
                        sim.model.integrator.name()
                    ),
                ));
            }
            sim.state.x.clone_from(&c.x);
            sim.state.v.clone_from(&c.v);
            sim.state.t = c.t;
            sim.state.history = if sim.model.integrator.keeps_history() {
                c.history.clone()
            } else {
                None
            };
            sim.steps = c.header.step;
        }

        // 5. Overwrite: the old run goes now that the new one is ready to write.
        if let (Some(dir), Some(files)) = (dir, replace) {
            let r = run_dir::remove_files(dir, &files)?;
            notes.push(format!(
                "{}: removed {} file{} of the earlier run",
                dir.display(),
                r.removed,
                if r.removed == 1 { "" } else { "s" }
            ));
            notes.extend(r.note(dir));
        }
        Ok(Run {
            scene_path: scene_path.to_path_buf(),
            config,
            opts: opts.clone(),
            sim,
            choice,
            identity,
            scene_hash,
            setup_ms,
            resume,
            notes,
            residual,
            auto,
        })
    }

    /// Where the run steps, and why.
    pub fn choice(&self) -> &BackendChoice {
        &self.choice
    }

    /// The solver the run steps with (`auto` resolved).
    pub fn solver(&self) -> crate::scene::SolverKind {
        self.config.solver
    }

    /// With `--solver auto`: the rule's pick and why ([`auto::pick`]).
    pub fn auto_pick(&self) -> Option<&auto::Pick> {
        self.auto.as_ref()
    }

    /// Things the user should hear about (files left alone, a different adapter on resume).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The step the run continues from (0 unless resuming).
    pub fn start_step(&self) -> usize {
        self.resume.as_ref().map_or(0, |r| r.checkpoint.header.step)
    }

    /// Steps asked for.
    pub fn requested_steps(&self) -> usize {
        self.config.steps
    }

    /// The simulation, at its starting state.
    pub fn simulation(&self) -> &Simulation {
        &self.sim
    }

    /// True when resuming a run that is already complete with the steps asked for (execute then
    /// writes nothing).
    pub fn already_complete(&self) -> bool {
        self.resume.as_ref().is_some_and(|r| {
            r.manifest.status == RunStatus::Complete
                && r.checkpoint.header.step == self.config.steps
        })
    }

    /// Steps the run to `requested_steps` (or until cancelled), writing the run directory.
    /// Returns the simulation and the statistics; an interrupted run returns `Ok` with status
    /// `interrupted`. A failed step or write marks the run `failed` on disk and returns the
    /// error.
    pub fn execute(
        self,
        mut on_step: impl FnMut(usize, &StepReport),
    ) -> Result<(Simulation, RunStats)> {
        let complete = self.already_complete();
        let start = self.start_step();
        let Run {
            scene_path,
            config,
            opts,
            mut sim,
            choice,
            identity,
            scene_hash,
            setup_ms,
            resume,
            residual,
            auto,
            ..
        } = self;
        let (stop, tolerance) = identity::stop_rule(config.stop);
        let mut stats = RunStats {
            scene: scene_path.display().to_string(),
            solver: sim.solver_name(),
            solver_auto_reason: auto.map(|p| p.reason),
            stop: stop.into(),
            tolerance,
            backend: choice.kind().into(),
            adapter: choice.adapter.as_ref().map(|a| a.to_string()),
            backend_reason: choice.reason.clone(),
            vertices: sim.model.num_vertices(),
            tets: sim.model.mesh.num_tets(),
            h: config.h,
            status: RunStatus::Running,
            message: None,
            requested_steps: config.steps,
            completed_steps: 0,
            resumed_at: Vec::new(),
            converged_steps: 0,
            first_unconverged_step: None,
            total_iterations: 0,
            total_wall_ms: 0.0,
            total_output_ms: 0.0,
            setup_ms,
            steps: Vec::new(),
            earlier_steps: Vec::new(),
        };
        let info = RunInfo {
            scene: &scene_path,
            scene_hash: &scene_hash,
            config: &config,
            choice: &choice,
            identity: &identity,
        };
        let mut writer = None;
        if let Some(r) = resume {
            stats.carry_earlier(r.earlier, start);
            stats.completed_steps = start;
            stats.resumed_at = r.manifest.resumed_at.clone();
            if complete {
                stats.status = RunStatus::Complete;
                return Ok((sim, stats));
            }
            stats.resumed_at.push(start);
            if let Some(dir) = &opts.out_dir {
                let mut w =
                    RunWriter::new(dir, &sim, &info, Some((r.manifest, start, sim.state.t)))?
                        .with_residual(residual);
                w.reopen(&stats)?;
                writer = Some(w);
            }
        } else if let Some(dir) = &opts.out_dir {
            let mut w = RunWriter::new(dir, &sim, &info, None)?.with_residual(residual);
            w.frame(0, &sim, None, &mut stats)?;
            writer = Some(w);
        }
        let cancelled = || {
            opts.cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::SeqCst))
        };
        let every = config.output.every.max(1);
        let mut status = RunStatus::Complete;
        // The start of the last step, kept for residual pictures (a frame's picture re-solves
        // the step that produced it) and VTU frames (their residual field is that step's).
        let keep_start = writer.as_ref().is_some_and(|w| w.needs_step_start());
        let mut step_start = None;
        for step in start + 1..=config.steps {
            if cancelled() {
                status = RunStatus::Interrupted;
                break;
            }
            if keep_start {
                step_start = Some(sim.state.clone());
            }
            let result = fault_injected(step)
                .and_then(|_| sim.step(opts.trace))
                .and_then(|report| {
                    on_step(step, &report);
                    stats.push(StepStats::new(step, sim.state.t, report));
                    match writer.as_mut() {
                        Some(w) if step % every == 0 || step == config.steps => {
                            w.frame(step, &sim, step_start.as_ref(), &mut stats)
                        }
                        _ => Ok(()),
                    }
                });
            if let Err(e) = result {
                stats.status = RunStatus::Failed;
                stats.message = Some(e.to_string().replace('\n', " "));
                if let Some(w) = writer.as_mut() {
                    // Best effort: the error being reported matters more than a second one.
                    let _ = w.finish(&stats);
                }
                return Err(e);
            }
        }
        if status == RunStatus::Interrupted {
            stats.message = Some(format!(
                "interrupted after step {} of {}",
                stats.completed_steps, config.steps
            ));
        }
        stats.status = status;
        if let Some(w) = writer.as_mut() {
            let end = |w: &mut RunWriter, stats: &mut RunStats| -> Result<()> {
                if w.last_frame() != Some(stats.completed_steps) {
                    // The last step started at `step_start` (none when no step ran).
                    w.frame(stats.completed_steps, &sim, step_start.as_ref(), stats)?;
                }
                w.finish(stats)
            };
            if let Err(e) = end(w, &mut stats) {
                stats.status = RunStatus::Failed;
                stats.message = Some(e.to_string().replace('\n', " "));
                let _ = w.finish(&stats);
                return Err(e);
            }
        }
        Ok((sim, stats))
    }
}

/// Loads what `--resume` continues in `dir` and checks it against this run.
fn load_resume(
    dir: &Path,
    manifest: Manifest,
    config: &RunConfig,
    model: &crate::problem::Model,
    key: &str,
) -> Result<Resume> {
    let path = dir.join(CHECKPOINT);
    if !path.exists() {
        return Err(dir_error(
            dir,
            "--resume: no checkpoint (checkpoint.bin) to resume from",
        ));
    }
    let checkpoint = Checkpoint::read(&path)?;
    let step = checkpoint.header.step;
    if step > config.steps {
        return Err(dir_error(
            dir,
            format!(
                "--resume: the checkpoint is at step {step}, past the {} steps asked for",
                config.steps
            ),
        ));
    }
    // Backend and adapter are checked once the backend is chosen; `auto` picks for the
    // checkpoint's.
    let was = &checkpoint.header.identity;
    let mut config = config.clone();
    let backend = match was.backend.as_str() {
        "gpu" => Backend::Gpu,
        _ => Backend::Cpu,
    };
    auto::resolve(&mut config, model, backend);
    let now = RunIdentity {
        backend: was.backend.clone(),
        adapter: was.adapter.clone(),
        ..identity::identity(
            &config,
            key.to_owned(),
            &BackendChoice::cpu(Backend::Cpu, ""),
        )
    };
    if let Some(why) = was.mismatch(&now) {
        return Err(JelloError::Invalid(format!(
            "{}: --resume: {why}; use --overwrite to start again",
            path.display()
        )));
    }
    // stats.json is a record, not state: unreadable means the resumed file starts after it.
    let earlier = std::fs::read(dir.join(STATS))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("steps").and_then(|s| s.as_array()).cloned())
        .unwrap_or_default();
    Ok(Resume {
        checkpoint,
        manifest,
        earlier,
    })
}

/// A fault-injection point for tests of the failure path (there is no other way to make a valid
/// scene fail mid-run: scene values are capped so energies stay finite): with the environment
/// variable `JELLO_FAULT_AT_STEP=N`, step N fails with a solver error before it starts.
fn fault_injected(step: usize) -> Result<()> {
    match std::env::var("JELLO_FAULT_AT_STEP")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(n) if n == step => Err(JelloError::Solver(format!(
            "step {step}: injected fault (JELLO_FAULT_AT_STEP)"
        ))),
        _ => Ok(()),
    }
}
