//! GPU-vs-CPU regression on the bundled scenes: the same solver with its element work on the
//! GPU (f32 kernels) and on the f64 CPU reference must produce the same trajectories.
//!
//! Bound: the per-step max vertex deviation stays below 1e-5 of the bounding-box diagonal. Both
//! runs stop at the same characteristic-norm tolerance (ε = 1e-5 of the characteristic force),
//! so they may differ by what that tolerance allows plus f32 round-off in the gradient; the
//! observed values on lavapipe are ~1e-7–1e-6, leaving a 10× margin. A GPU test FAILS when no
//! adapter is found unless JELLO_SKIP_GPU_TESTS=1.

use jello::scene::Scene;
use std::path::Path;

fn gpu_or_skip() -> bool {
    match jello::gpu::Device::new(jello::gpu::Backend::Gpu) {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("JELLO_SKIP_GPU_TESTS").as_deref() == Ok("1") {
                eprintln!("skipping GPU test: {e}");
                false
            } else {
                panic!("no GPU adapter ({e}); set JELLO_SKIP_GPU_TESTS=1 to skip GPU tests");
            }
        }
    }
}

fn check(scene: &str, steps: usize, bound: f64) {
    if !gpu_or_skip() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(scene);
    let built = Scene::load(&path).unwrap().build().unwrap();
    let report = jello::compare::compare(&path, &built, steps).unwrap();
    for s in &report.steps {
        eprintln!(
            "{scene} step {}: max {:.3e} mean {:.3e} iterations {}/{}",
            s.step, s.max_deviation, s.mean_deviation, s.iterations_cpu, s.iterations_gpu
        );
    }
    assert!(
        report.worst() < bound,
        "{scene}: worst deviation {:.3e} ≥ {bound:e}",
        report.worst()
    );
}

#[test]
fn newton_twist_gpu_matches_cpu() {
    check("twist.toml", 20, 1e-5);
}

#[test]
fn newton_cantilever_gpu_matches_cpu() {
    check("cantilever.toml", 20, 1e-5);
}

#[test]
fn newton_stiff_soft_gpu_matches_cpu() {
    check("stiff_soft.toml", 20, 1e-5);
}

#[test]
fn newton_drop_gpu_matches_cpu() {
    // Includes the impact: barrier terms are f64 on the CPU in both runs.
    check("drop.toml", 30, 1e-5);
}

/// `--backend gpu` runs on an adapter and says which one in stats.json.
#[test]
fn gpu_run_reports_its_adapter() {
    if !gpu_or_skip() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/cantilever.toml");
    let mut built = Scene::load(&path).unwrap().build().unwrap();
    built.config.steps = 2;
    let opts = jello::runner::RunOptions {
        out_dir: None,
        trace: false,
        backend: jello::gpu::Backend::Gpu,
    };
    let (sim, stats) = jello::runner::run(&path, built, &opts, |_, _| {}).unwrap();
    assert_eq!(stats.backend, "gpu");
    let adapter = stats.adapter.expect("adapter name");
    assert!(!adapter.is_empty());
    assert_eq!(sim.elastic_backend_name(), adapter);
    assert_eq!(stats.converged_steps, 2);
}
