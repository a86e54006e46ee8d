//! GPU-vs-CPU regression on the bundled scenes: the same solver with its element work on the
//! GPU (f32 kernels) and on the f64 CPU reference must produce the same trajectories.
//!
//! Bound: the per-step max vertex deviation stays below 1e-5 of the bounding-box diagonal. Both
//! runs stop at the same characteristic-norm tolerance (ε = 1e-5 of the characteristic force),
//! so they may differ by what that tolerance allows plus f32 round-off in the gradient; the
//! observed values on lavapipe are ~1e-7–1e-6, leaving a 10× margin. A GPU test FAILS when no
//! adapter is found unless JELLO_SKIP_GPU_TESTS=1.

use crate::common;

use jello::scene::Scene;
use std::path::Path;

fn gpu_or_skip() -> bool {
    common::gpu_device().is_some()
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
        ..Default::default()
    };
    let (sim, stats) = jello::runner::run(&path, built, &opts, |_, _| {}).unwrap();
    assert_eq!(stats.backend, "gpu");
    let adapter = stats.adapter.expect("adapter name");
    assert!(!adapter.is_empty());
    assert_eq!(sim.elastic_backend_name(), adapter);
    assert_eq!(stats.converged_steps, 2);
}

/// `jello compare` on the command line: within the default bound it exits 0 and writes the
/// per-step report as JSON; with a bound below what f32 kernels can reach it exits non-zero with
/// a one-line error naming the limit.
#[test]
fn compare_cli_exits_non_zero_beyond_the_bound() {
    if !gpu_or_skip() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_jello");
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/cantilever.toml");
    let dir = std::env::temp_dir().join(format!("jello_compare_cli_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("compare.json");
    let run = |extra: &[&str]| {
        let mut args = vec!["compare", scene.to_str().unwrap(), "--steps", "3"];
        args.extend_from_slice(extra);
        std::process::Command::new(bin)
            .args(&args)
            .output()
            .unwrap()
    };

    let ok = run(&["--json", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("ok: worst step deviation"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!report["adapter"].as_str().unwrap().is_empty());
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let mut worst = 0.0f64;
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["step"].as_u64(), Some(i as u64 + 1));
        let (max, mean) = (
            s["max_deviation"].as_f64().unwrap(),
            s["mean_deviation"].as_f64().unwrap(),
        );
        assert!(
            (0.0..=max).contains(&mean),
            "step {}: mean {mean} max {max}",
            i + 1
        );
        assert!(max <= jello::compare::DEFAULT_MAX_DEVIATION);
        assert!(s["iterations_cpu"].as_u64().is_some() && s["iterations_gpu"].as_u64().is_some());
        // Newton meets the cantilever's stop rule on every step, on both backends.
        assert_eq!(s["converged_cpu"].as_bool(), Some(true), "step {}", i + 1);
        assert_eq!(s["converged_gpu"].as_bool(), Some(true), "step {}", i + 1);
        worst = worst.max(max);
    }
    // f32 element work against f64 cannot agree to 1e-15 of the diagonal over three Newton steps
    // of a sagging beam; if it ever did, the limit case below would test nothing.
    assert!(worst > 1e-15, "worst deviation {worst:e}: runs identical?");

    let tight = run(&["--max-deviation", "1e-15"]);
    let stderr = String::from_utf8_lossy(&tight.stderr);
    assert_eq!(tight.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("exceeds --max-deviation"), "{stderr}");
    // The offending steps are flagged in the table.
    assert!(String::from_utf8_lossy(&tight.stdout).contains("> limit"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn newton_contact_balls_gpu_matches_cpu() {
    // IPC contact between the balls: its barrier, CCD and κ are f64 on the CPU in both runs,
    // the elastic terms f32 on the GPU in one. 30 steps cover the approach, the impact
    // (from step 6) and the rebound. Measured on lavapipe: ≤ 5.6e-8 of the diagonal, the same
    // iteration counts. (With the balls' centres in one z-plane the scene is mirror-symmetric
    // and the impact step has two mirror-image minima, 7.8e-4 m apart with equal energies to
    // 2e-9 J and an energy ridge of 1.5e-2 J between them: the two runs then landed in
    // different ones. The bundled scene offsets one ball in z.)
    check("contact_balls.toml", 30, 1e-6);
}

#[test]
fn newton_contact_hoop_with_friction_gpu_matches_cpu() {
    // IPC contact with lagged friction (μ = 0.5) between a soft ball and a pinned hoop: f32
    // elastic terms on the GPU in one run, everything else f64 in both. 30 steps cover the
    // fall, the impact (step 21) and the wedging (steps 22–30). Measured on lavapipe: ≤ 3.6e-8
    // of the diagonal over 60 steps, the same iteration counts. (Dropped on the hoop's axis the
    // scene is mirror-symmetric and the runs parted at the impact, 1.2e-3 of the diagonal; the
    // bundled scene drops the ball 8 mm off the axis.)
    check("contact_hoop.toml", 30, 1e-6);
}

#[test]
fn newton_contact_stack_with_friction_gpu_matches_cpu() {
    // Three cubes landing on each other and the ground (IPC between the cubes, μ = 0.5): f32
    // elastic terms on the GPU in one run. 30 steps cover the landings (from step 5) and the
    // settling. Measured on lavapipe: ≤ 5.0e-7 of the diagonal, the same iteration counts.
    // Without friction the runs part in the stack's lateral sliding mode, which has no
    // restoring force (1.4e-2 of the diagonal after 20 steps: round-off pushes the cubes
    // sideways and nothing pushes them back); the bundled scene has friction.
    check("contact_stack.toml", 30, 1e-5);
}

#[test]
fn newton_contact_cup_gpu_matches_cpu() {
    // A ball thrown into a triangle-mesh cup (an IPC obstacle read from an OBJ file): 40 steps
    // cover the fall, the hit on the wall and the first bounces on the bottom. Measured on
    // lavapipe: ≤ 1.6e-6 of the diagonal, the same iteration counts.
    check("contact_cup.toml", 40, 1e-5);
}

/// BDF2 on the device paths against the f64 CPU reference, in lockstep (`jello compare`) over
/// the drop scene's first 30 steps, impact included: Newton with its element work on the GPU
/// (the device backend takes the inertia weight 1/ĥ² and the barrier's 1/h² separately) and
/// JGS2 entirely on the GPU (`DeviceJgs2`: f0 = 1/ĥ², f3 = 1/h² in its vertex and face
/// kernels). The ball at resolution 6 instead of 8: the same fall and impact with 40% of the
/// vertices (this was the suite's longest test). Bounds as [`check`] (Newton, 1e-5 of the
/// diagonal) and tests/gpu/gpu_compare_jgs2.rs (JGS2 on drop, 1e-2: both runs stop just under
/// ε and the impact amplifies the difference). Vulkan only in `.ci/run`, like the other
/// whole-run contact compares there.
#[test]
fn bdf2_on_the_gpu_matches_the_cpu() {
    use jello::problem::Integrator;
    if !gpu_or_skip() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("steps = 80") && text.contains("resolution = 8"));
    let text = text
        .replace("steps = 80", "steps = 80\nintegrator = \"bdf2\"")
        .replace("resolution = 8", "resolution = 6");
    for (solver, bound) in [("newton", 1e-5), ("jgs2", 1e-2)] {
        let mut built = Scene::parse(&path, &text).unwrap().build().unwrap();
        assert_eq!(built.model.integrator, Integrator::Bdf2);
        built.config.solver = solver.parse().unwrap();
        let report = jello::compare::compare(&path, &built, 30).unwrap();
        let (it_cpu, it_gpu) = report.steps.iter().fold((0, 0), |a, s| {
            (a.0 + s.iterations_cpu, a.1 + s.iterations_gpu)
        });
        eprintln!(
            "drop, bdf2, {solver}, 30 steps on {}: worst deviation {:.3e}, iterations cpu \
             {it_cpu} gpu {it_gpu}",
            report.adapter,
            report.worst()
        );
        assert!(
            report.worst() < bound,
            "{solver}: worst deviation {:.3e} ≥ {bound:e}",
            report.worst()
        );
    }
}
