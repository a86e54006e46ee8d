//! Writing a run directory as the run goes: frames, `stats.json`, `checkpoint.bin` and
//! `manifest.json`, in an order that keeps them consistent whenever the process stops.
//!
//! At each frame: the manifest first lists the frame's files (so a crash while writing them
//! leaves no unlisted file), then the frame files and `sim.pvd`, `stats.json`, the checkpoint,
//! and last the manifest with the frame and `last_complete_step`. So `stats.json` always lists at
//! least the checkpoint's steps and every file on disk is listed; a resume trusts the
//! checkpoint and trims the rest to it.

use super::residual::{step_problem, vertex_residuals, ResidualProbe};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::gpu::{Backend, BackendChoice};
use crate::output::run_dir::{self, CHECKPOINT, STATS};
use crate::output::{
    atomic_write, frame_name, Checkpoint, CheckpointHeader, FrameData, FrameEntry, FrameOptions,
    FramePainter, FrameWriter, Manifest, RunIdentity, RunStats, RunStatus, MANIFEST,
    MANIFEST_FORMAT,
};
use crate::problem::State;
use crate::scene::RunConfig;
use crate::sim::Simulation;
use std::path::{Path, PathBuf};

/// What a run directory needs to know about the run.
pub(super) struct RunInfo<'a> {
    pub scene: &'a Path,
    pub scene_hash: &'a str,
    pub config: &'a RunConfig,
    pub choice: &'a BackendChoice,
    pub identity: &'a RunIdentity,
}

/// The writer of one run directory.
pub(super) struct RunWriter {
    dir: PathBuf,
    frames: FrameWriter,
    painter: Option<FramePainter>,
    manifest: Manifest,
    identity: RunIdentity,
    /// Step of the last frame on disk.
    last_frame: Option<usize>,
    /// Residual pictures instead of plain PNG shading (`--residual-iteration`).
    residual: Option<ResidualProbe>,
    /// Whether frames include `.vtu` files (whole or per object).
    vtu: bool,
}

/// The step of a frame file `frames/frame_NNNNN.ext`.
fn frame_step(rel: &str) -> Option<usize> {
    rel.strip_prefix("frames/frame_")?
        .split_once('.')?
        .0
        .parse()
        .ok()
}

impl RunWriter {
    /// A writer for a fresh run (`resume` = `None`) or for continuing `resume`'s manifest from
    /// checkpoint step `resume.1` at time `resume.2`.
    pub fn new(
        dir: &Path,
        sim: &Simulation,
        info: &RunInfo<'_>,
        resume: Option<(Manifest, usize, f64)>,
    ) -> Result<Self> {
        let out = &info.config.output;
        let mut frames = FrameWriter::new(
            dir,
            &sim.model,
            FrameOptions {
                vtu: out.vtu,
                vtu_per_object: out.vtu_per_object,
                obj: out.obj,
            },
        );
        let painter = out
            .png
            .then(|| {
                FramePainter::new(
                    &sim.model,
                    (out.png_size[0], out.png_size[1]),
                    info.choice.backend == Backend::Gpu,
                )
            })
            .transpose()?;
        let fresh = || Manifest {
            format: MANIFEST_FORMAT.into(),
            jello_version: env!("CARGO_PKG_VERSION").into(),
            status: RunStatus::Running,
            message: None,
            pid: std::process::id(),
            scene: String::new(),
            scene_hash: String::new(),
            solver: String::new(),
            backend: String::new(),
            adapter: None,
            backend_reason: String::new(),
            requested_steps: 0,
            completed_steps: 0,
            last_complete_step: 0,
            resumed_at: Vec::new(),
            frames: Vec::new(),
            files: Vec::new(),
        };
        let mut last_frame = None;
        let mut manifest = match resume {
            None => fresh(),
            Some((mut m, step, t)) => {
                // Frames past the checkpoint (a run stopped between a frame's files and its
                // checkpoint) are not part of the trajectory being continued.
                let stale: Vec<String> = m
                    .files
                    .iter()
                    .filter(|f| frame_step(f).is_some_and(|s| s > step))
                    .cloned()
                    .collect();
                run_dir::remove_files(dir, &stale)?;
                m.files.retain(|f| !stale.contains(f));
                m.frames.retain(|f| f.step <= step);
                if m.frames.last().map(|f| f.step) != Some(step) {
                    m.frames.push(FrameEntry { step, time: t });
                }
                m.resumed_at.push(step);
                m.last_complete_step = step;
                m.completed_steps = step;
                m.message = None;
                m.pid = std::process::id();
                m.format = MANIFEST_FORMAT.into();
                m.jello_version = env!("CARGO_PKG_VERSION").into();
                let listed: Vec<(f64, usize)> = m.frames.iter().map(|f| (f.time, f.step)).collect();
                frames.resume(&listed);
                last_frame = Some(step);
                m
            }
        };
        manifest.status = RunStatus::Running;
        manifest.scene = info.scene.display().to_string();
        manifest.scene_hash = info.scene_hash.into();
        manifest.solver = sim.solver_name();
        manifest.backend = info.choice.kind().into();
        manifest.adapter = info.choice.adapter.as_ref().map(|a| a.to_string());
        manifest.backend_reason = info.choice.reason.clone();
        manifest.requested_steps = info.config.steps;
        for f in [MANIFEST, STATS, CHECKPOINT] {
            manifest.add_file(f);
        }
        for f in frames.series_files() {
            manifest.add_file(&f);
        }
        Ok(RunWriter {
            dir: dir.to_path_buf(),
            frames,
            painter,
            manifest,
            identity: info.identity.clone(),
            last_frame,
            residual: None,
            vtu: out.vtu || out.vtu_per_object,
        })
    }

    /// Paints PNG frames by the residual `probe` reports (when there are PNG frames).
    pub fn with_residual(mut self, probe: Option<ResidualProbe>) -> Self {
        self.residual = probe.filter(|_| self.painter.is_some());
        self
    }

    /// Whether frames need their step's start: residual pictures re-solve the step, and VTU
    /// frames carry the residual of the step's problem at its end.
    pub fn needs_step_start(&self) -> bool {
        self.residual.is_some() || self.vtu
    }

    /// Step of the last frame on disk.
    pub fn last_frame(&self) -> Option<usize> {
        self.last_frame
    }

    /// Opens the directory for a resumed run: the manifest says `running`, `sim.pvd` and
    /// `stats.json` list nothing past the checkpoint.
    pub fn reopen(&mut self, stats: &RunStats) -> Result<()> {
        self.manifest.write(&self.dir)?;
        self.frames.write_series()?;
        self.write_stats(stats)
    }

    /// Writes the frame, stats and checkpoint of `step` (the simulation's current state), and
    /// the manifest around them; the time goes to the step's `output_ms`. With residual
    /// pictures, `start` is the state the step began from (`None` for frame 0: plain shading).
    pub fn frame(
        &mut self,
        step: usize,
        sim: &Simulation,
        start: Option<&State>,
        stats: &mut RunStats,
    ) -> Result<()> {
        let t0 = Instant::now();
        let png = self.painter.is_some();
        for f in self.frames.files(step, png) {
            self.manifest.add_file(&f);
        }
        self.manifest.write(&self.dir)?;
        let s = &sim.state;
        // ‖∇E‖ per vertex of the step that produced this state, at its end (the last iterate),
        // evaluated in f64 on the problem the run solved; frame 0 has no step. A step that fell
        // back to substeps ended on the last substep's problem, whose start is not kept: NaN
        // says "unknown" rather than showing the full step's residual, which was not solved.
        let substepped = stats.steps.last().is_some_and(|st| st.substeps > 1);
        let residual = match start {
            Some(_) if self.vtu && substepped => Some(vec![f64::NAN; sim.model.num_vertices()]),
            Some(start) if self.vtu => {
                let problem = step_problem(&sim.model, start, sim.h, sim.static_increments);
                Some(vertex_residuals(&problem, &sim.model, &s.x).0)
            }
            _ => None,
        };
        self.frames.write(
            step,
            &sim.model,
            &FrameData {
                t: s.t,
                x: &s.x,
                v: &s.v,
                residual: residual.as_deref(),
            },
        )?;
        if let Some(p) = &self.painter {
            let path = self.dir.join("frames").join(frame_name(step, "png"));
            match (self.residual.as_mut(), start) {
                (Some(probe), Some(start)) => {
                    let field = probe.probe(&sim.model, start, sim.h, sim.static_increments)?;
                    let title = format!("‖∇E‖ after {} it", field.iterations);
                    p.paint_field(&field.x, &field.norms, "N", &title, &path)?;
                }
                _ => {
                    p.paint(&s.x, s.t, &path)?;
                }
            }
        }
        stats.add_output_ms(ms(t0));
        let t1 = Instant::now();
        self.write_stats(stats)?;
        Checkpoint {
            header: CheckpointHeader {
                jello_version: env!("CARGO_PKG_VERSION").into(),
                step,
                dofs: s.x.len(),
                history: s.history.is_some(),
                identity: self.identity.clone(),
            },
            t: s.t,
            x: s.x.clone(),
            v: s.v.clone(),
            history: s.history.clone(),
        }
        .write(&self.dir.join(CHECKPOINT))?;
        self.manifest.frames.push(FrameEntry { step, time: s.t });
        self.manifest.last_complete_step = step;
        self.manifest.completed_steps = stats.completed_steps;
        self.manifest.write(&self.dir)?;
        stats.add_output_ms(ms(t1));
        self.last_frame = Some(step);
        Ok(())
    }

    /// Writes `stats.json`.
    pub fn write_stats(&self, stats: &RunStats) -> Result<()> {
        atomic_write(&self.dir.join(STATS), &stats.to_json()?)
    }

    /// Ends the run: `stats.json` and the manifest get `stats.status` and `stats.message`.
    pub fn finish(&mut self, stats: &RunStats) -> Result<()> {
        self.write_stats(stats)?;
        self.manifest.status = stats.status;
        self.manifest.message = stats.message.clone();
        self.manifest.completed_steps = stats.completed_steps;
        self.manifest.write(&self.dir)
    }
}

/// Milliseconds since `t`.
pub(super) fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The error of a run directory that cannot be used, naming it.
pub(super) fn dir_error(dir: &Path, msg: impl std::fmt::Display) -> JelloError {
    JelloError::Invalid(format!("{}: {msg}", dir.display()))
}
