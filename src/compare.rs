//! GPU-vs-CPU regression: run one scene on both backends and measure how far the trajectories
//! drift apart (what `jello compare` prints and what users can put in their own CI).

use crate::error::{JelloError, Result};
use crate::gpu::Backend;
use crate::runner::setup;
use crate::scene::BuiltScene;
use serde::Serialize;
use std::path::Path;

/// Default bound on the per-step max vertex deviation, as a fraction of the rest bounding-box
/// diagonal. f32 kernels against the f64 reference, both stopped at the same characteristic-norm
/// tolerance, stay orders of magnitude below it on the bundled scenes (see tests/gpu/gpu_compare.rs).
pub const DEFAULT_MAX_DEVIATION: f64 = 1e-3;

/// One step of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareStep {
    /// Step index (1-based).
    pub step: usize,
    /// Largest vertex distance between the two runs / bounding-box diagonal.
    pub max_deviation: f64,
    /// Mean vertex distance / bounding-box diagonal.
    pub mean_deviation: f64,
    /// Solver iterations on the CPU (f64) run.
    pub iterations_cpu: usize,
    /// Solver iterations on the GPU run.
    pub iterations_gpu: usize,
    /// Whether the CPU run's step met its stop rule.
    pub converged_cpu: bool,
    /// Whether the GPU run's step met its stop rule.
    pub converged_gpu: bool,
}

/// A whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// Adapter of the GPU run.
    pub adapter: String,
    /// Rest bounding-box diagonal, m.
    pub diagonal: f64,
    /// Per step.
    pub steps: Vec<CompareStep>,
}

impl CompareReport {
    /// The largest per-step max deviation.
    pub fn worst(&self) -> f64 {
        self.steps
            .iter()
            .map(|s| s.max_deviation)
            .fold(0.0, f64::max)
    }
}

/// Runs `built` for `steps` steps on the f64 CPU path and on the GPU (error when no adapter),
/// in lockstep, and reports per-step deviations.
pub fn compare(scene_path: &Path, built: &BuiltScene, steps: usize) -> Result<CompareReport> {
    let cache = scene_path.parent().map(|d| d.join(".jello-cache"));
    let mut cpu = setup(built, Backend::Cpu, cache.as_deref())?.sim;
    let gpu = setup(built, Backend::Gpu, cache.as_deref())?;
    let adapter = gpu
        .adapter
        .ok_or_else(|| JelloError::Gpu("no GPU adapter for the comparison".into()))?;
    let mut gpu = gpu.sim;
    let diagonal = built
        .model
        .mesh
        .bounding_box()
        .map(|(lo, hi)| ((0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>()).sqrt())
        .unwrap_or(1.0)
        .max(1e-300);
    // Grown as steps complete: nothing is reserved per requested step.
    let mut out = Vec::new();
    for step in 1..=steps {
        let a = cpu.step(false)?;
        let b = gpu.step(false)?;
        let d: Vec<f64> = cpu
            .state
            .x
            .chunks_exact(3)
            .zip(gpu.state.x.chunks_exact(3))
            .map(|(p, q)| {
                ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
            })
            .collect();
        out.push(CompareStep {
            step,
            max_deviation: d.iter().copied().fold(0.0, f64::max) / diagonal,
            mean_deviation: d.iter().sum::<f64>() / d.len().max(1) as f64 / diagonal,
            iterations_cpu: a.iterations,
            iterations_gpu: b.iterations,
            converged_cpu: a.converged,
            converged_gpu: b.converged,
        });
    }
    Ok(CompareReport {
        adapter,
        diagonal,
        steps: out,
    })
}
