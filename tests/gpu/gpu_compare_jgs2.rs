//! GPU-vs-CPU regression of JGS2 and VBD on the bundled scenes over 50 steps: the device
//! iteration (f32 WGSL kernels, `DeviceJgs2`) against the f64 reference (`Jgs2Solver`), through
//! `jello::compare` (what `jello compare --solver jgs2` runs).
//!
//! Bounds (per-step max vertex deviation / bounding-box diagonal), with the values measured on
//! lavapipe:
//! - twist, cantilever: 1e-5 (measured ≤ 6e-7): one or two iterations per step, both runs stop
//!   far below ε.
//! - stiff_soft: 2e-3 (measured 4.2e-4). JGS2 converges linearly, so both runs stop just under
//!   ε = 1e-5 and keep a difference of that size; the soft half swings through large rotations
//!   that carry it along.
//! - drop, its ball at resolution 6 instead of 8 (as gpu_compare's BDF2 compare: the same fall
//!   and impact with 40% of the vertices): 1e-2 (measured 5.6e-3 on lavapipe, 452 vs 474
//!   iterations over 50 steps; at resolution 8, 2.8e-3 with 671 vs 719). Same, and the impact
//!   turns the stopping difference into a ~0.6% difference in the bounce velocity, which the
//!   flight that follows accumulates linearly. Every GPU state also stays above the ground.
//!
//! A GPU test FAILS when no adapter is found unless JELLO_SKIP_GPU_TESTS=1.

use crate::common;

use jello::gpu::Backend;
use jello::runner::setup;
use jello::scene::Scene;
use jello::solver::jgs2::Safeguard;
use std::path::Path;

fn gpu_or_skip() -> bool {
    common::gpu_device().is_some()
}

fn check(scene: &str, solver: &str, variant: Option<&str>, steps: usize, bound: f64) {
    check_with(scene, solver, variant, None, steps, bound)
}

/// [`check`] with the JGS2/VBD safeguard set (`None`: the solver's default).
fn check_with(
    scene: &str,
    solver: &str,
    variant: Option<&str>,
    safeguard: Option<Safeguard>,
    steps: usize,
    bound: f64,
) {
    if !gpu_or_skip() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(scene);
    let mut built = Scene::load(&path).unwrap().build().unwrap();
    built.config.solver = solver.parse().unwrap();
    built.config.variant =
        variant.map(|v| jello::scene::SweepVariant::from_name(v).unwrap().into());
    built.config.safeguard = safeguard;
    let report = jello::compare::compare(&path, &built, steps).unwrap();
    let (mut it_cpu, mut it_gpu) = (0, 0);
    for s in &report.steps {
        it_cpu += s.iterations_cpu;
        it_gpu += s.iterations_gpu;
    }
    eprintln!(
        "{scene} {solver} {variant:?}, {steps} steps on {}: worst deviation {:.3e}, iterations \
         cpu {it_cpu} gpu {it_gpu}",
        report.adapter,
        report.worst()
    );
    assert!(
        report.worst() < bound,
        "{scene} {solver}: worst deviation {:.3e} ≥ {bound:e}",
        report.worst()
    );
    // Comparable work: within 30% of the reference's iteration count.
    assert!(
        (it_gpu as f64) < 1.3 * it_cpu as f64 + 5.0 && (it_cpu as f64) < 1.3 * it_gpu as f64 + 5.0,
        "{scene}: iterations cpu {it_cpu} gpu {it_gpu}"
    );
}

#[test]
fn jgs2_twist_gpu_matches_cpu() {
    check("twist.toml", "jgs2", None, 50, 1e-5);
}

/// With the model step every iteration (`Safeguard::Always`) both runs take the same kind of
/// step and stop far below ε: 1e-5 (measured 5.8e-7 on lavapipe; `Off`: 5.3e-7). With the
/// default cut, the plain-or-model decision of an iteration near convergence can differ between
/// f32 and f64 (the length test's curvature sits at the device's round-off allowance there): on
/// lavapipe both runs agree to 4e-7 through step 28, then one iteration of step 29 goes the
/// other way, the two runs stop at different iterates within ε (1.2e-5 apart) and the swing
/// carries the difference (1.96e-3 by step 50, the same 78 iterations on both): 5e-3.
#[test]
fn jgs2_cantilever_gpu_matches_cpu() {
    check_with(
        "cantilever.toml",
        "jgs2",
        None,
        Some(Safeguard::Always),
        50,
        1e-5,
    );
    check("cantilever.toml", "jgs2", None, 50, 5e-3);
}

#[test]
fn jgs2_gs_cantilever_gpu_matches_cpu() {
    check("cantilever.toml", "jgs2", Some("gs"), 50, 1e-4);
}

#[test]
fn jgs2_stiff_soft_gpu_matches_cpu() {
    check("stiff_soft.toml", "jgs2", None, 50, 2e-3);
}

#[test]
fn vbd_twist_gpu_matches_cpu() {
    check("twist.toml", "vbd", None, 50, 1e-4);
}

/// Stable Neo-Hookean: plain VBD's exact diagonal blocks on both sides (the device's element
/// pass with `ELASTIC_EXACT_SNH`, the CPU's closed form). Over 2 steps the deviation was 3.4e-8
/// on lavapipe and llvmpipe-GL, and 4.65e-7 on both with the device's blocks projected instead
/// (the flag removed): 1.5e-7 tells the two apart. Over 20 steps f32 drift dominates (7e-7
/// lavapipe, 2.1e-5 GL; 7.1e-5 lavapipe without the flag), so that run is held to 1e-4 like
/// `vbd_twist`.
#[test]
fn vbd_cantilever_gpu_matches_cpu() {
    check("cantilever.toml", "vbd", None, 2, 1.5e-7);
    check("cantilever.toml", "vbd", None, 20, 1e-4);
}

/// The drop's JGS2 compare ([`check`]'s bound and work test) with the GPU run's every state
/// above the ground: one lockstep run as `jello::compare` steps it (`setup` on both backends,
/// the subspace cache beside the scene), so the device run checked against the ground is the
/// compared one rather than a second run of its own. The ball at resolution 6 (see the module
/// docs): at 8 this was the GPU crate's longest test.
#[test]
fn jgs2_drop_gpu_matches_cpu_and_stays_above_the_ground() {
    if !gpu_or_skip() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("resolution = 8"));
    let text = text.replace("resolution = 8", "resolution = 6");
    let mut built = Scene::parse(&path, &text).unwrap().build().unwrap();
    built.config.solver = "jgs2".parse().unwrap();
    let cache = path.parent().unwrap().join(".jello-cache");
    let mut cpu = setup(&built, Backend::Cpu, Some(&cache)).unwrap().sim;
    let gpu = setup(&built, Backend::Gpu, Some(&cache)).unwrap();
    assert!(gpu.adapter.is_some());
    let mut gpu = gpu.sim;
    let (lo, hi) = built.model.mesh.bounding_box().unwrap();
    let diagonal = (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt();
    let (mut worst, mut it_cpu, mut it_gpu) = (0.0f64, 0, 0);
    for step in 1..=50 {
        let (a, b) = (cpu.step(false).unwrap(), gpu.step(false).unwrap());
        it_cpu += a.iterations;
        it_gpu += b.iterations;
        worst = worst.max(common::max_dist(&cpu.state.x, &gpu.state.x) / diagonal);
        let low = gpu
            .state
            .x
            .chunks_exact(3)
            .map(|p| p[1])
            .fold(f64::INFINITY, f64::min);
        assert!(b.converged, "step {step}");
        assert!(
            low > 0.0,
            "step {step}: a vertex reached the ground ({low:e} m)"
        );
    }
    eprintln!("drop.toml jgs2, 50 steps: worst deviation {worst:.3e}, iterations cpu {it_cpu} gpu {it_gpu}");
    assert!(
        worst < 1e-2,
        "drop.toml jgs2: worst deviation {worst:.3e} ≥ 1e-2"
    );
    assert!(
        (it_gpu as f64) < 1.3 * it_cpu as f64 + 5.0 && (it_cpu as f64) < 1.3 * it_gpu as f64 + 5.0,
        "drop.toml: iterations cpu {it_cpu} gpu {it_gpu}"
    );
}
