//! Keyframed pin scripts, `transform.fit` with an anchor, and the twist–stretch–squash (TSS)
//! scenes built from them: the bundled armadillo scene (assets/scenes/twist_stretch_squash.toml,
//! on ../shared/meshes; checked cheaply here, a step of it only) and a small TSS bar run to the
//! end with projected Newton, every step to CN ε = 1e-5 and every pinned vertex exactly where its
//! script puts it.

use crate::common;

use jello::problem::{Phase, Script};
use jello::runner::{run, setup, RunOptions};
use jello::scene::{Scene, ScriptSpec};
use std::f64::consts::PI;
use std::path::{Path, PathBuf};

fn scene_path(name: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("jello_scenes_tss_{}", std::process::id()))
        .join(format!("{name}.toml"))
}

fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// A phase: rotation (`angle` rad about `axis` through `center`) and/or translation.
fn phase(
    start: f64,
    end: f64,
    rot: Option<([f64; 3], [f64; 3], f64)>,
    translation: [f64; 3],
) -> Phase {
    let (center, axis, angle) = rot.unwrap_or(([0.0; 3], [1.0, 0.0, 0.0], 0.0));
    Phase {
        start,
        end,
        center,
        axis,
        angle,
        translation,
    }
}

/// The issue's example: half a turn about x through (0.5, 0, 0) over 0–2 s, then +0.3 m along
/// x over 2–3 s, then −0.6 m over 3–4 s; positions worked out by hand for p0 = (0.5, 0.1, 0).
#[test]
fn keyframes_compose_to_hand_computed_positions() {
    let s = Script::Keyframes {
        phases: vec![
            phase(
                0.0,
                2.0,
                Some(([0.5, 0.0, 0.0], [1.0, 0.0, 0.0], PI)),
                [0.0; 3],
            ),
            phase(2.0, 3.0, None, [0.3, 0.0, 0.0]),
            phase(3.0, 4.0, None, [-0.6, 0.0, 0.0]),
        ],
    };
    let p0 = [0.5, 0.1, 0.0];
    for (t, want) in [
        (-1.0, [0.5, 0.1, 0.0]),  // before every window: nothing yet
        (0.0, [0.5, 0.1, 0.0]),   // at the first start
        (1.0, [0.5, 0.0, 0.1]),   // a quarter turn: (y, z) = (0.1, 0) → (0, 0.1)
        (2.0, [0.5, -0.1, 0.0]),  // half a turn
        (2.5, [0.65, -0.1, 0.0]), // half of +0.3
        (3.0, [0.8, -0.1, 0.0]),
        (3.5, [0.5, -0.1, 0.0]), // half of −0.6
        (4.0, [0.2, -0.1, 0.0]),
        (9.0, [0.2, -0.1, 0.0]), // after every window: all of it
    ] {
        let got = s.position(p0, t);
        assert!(dist(got, want) < 1e-15, "t = {t}: {got:?} vs {want:?}");
    }
}

/// Rotation then translation do not commute: the script applies its phases in order (and, in
/// one phase with both, the rotation first), with overlapping windows each at its own progress.
#[test]
fn keyframes_apply_phases_in_order() {
    let quarter_z = Some(([0.0; 3], [0.0, 0.0, 1.0], PI / 2.0));
    let p0 = [1.0, 0.0, 0.0];
    // Turn then move: (1,0,0) → (0,1,0) → (1,1,0). The other order would give (0,2,0).
    let turn_then_move = Script::Keyframes {
        phases: vec![
            phase(0.0, 1.0, quarter_z, [0.0; 3]),
            phase(1.0, 2.0, None, [1.0, 0.0, 0.0]),
        ],
    };
    let got = turn_then_move.position(p0, 2.0);
    assert!(dist(got, [1.0, 1.0, 0.0]) < 1e-15, "{got:?}");
    let move_then_turn = Script::Keyframes {
        phases: vec![
            phase(0.0, 1.0, None, [1.0, 0.0, 0.0]),
            phase(1.0, 2.0, quarter_z, [0.0; 3]),
        ],
    };
    let got = move_then_turn.position(p0, 2.0);
    assert!(dist(got, [0.0, 2.0, 0.0]) < 1e-15, "{got:?}");
    // One phase with both, halfway: 45° about z, then half of (0, 0, 1).
    let both = Script::Keyframes {
        phases: vec![phase(0.0, 1.0, quarter_z, [0.0, 0.0, 1.0])],
    };
    let h = 0.5f64.sqrt();
    let got = both.position(p0, 0.5);
    assert!(dist(got, [h, h, 0.5]) < 1e-15, "{got:?}");
    // Overlapping windows: at t = 1.5 the turn (0–2 s) is 3/4 done, the move (1–3 s) 1/4.
    let overlap = Script::Keyframes {
        phases: vec![
            phase(0.0, 2.0, quarter_z, [0.0; 3]),
            phase(1.0, 3.0, None, [1.0, 0.0, 0.0]),
        ],
    };
    let a = 0.75 * PI / 2.0;
    let got = overlap.position(p0, 1.5);
    assert!(dist(got, [a.cos() + 0.25, a.sin(), 0.0]) < 1e-15, "{got:?}");
}

/// Positions are continuous at every phase boundary (a phase ends exactly where the next one
/// starts from) and constant outside every window.
#[test]
fn keyframes_are_continuous_and_clamped() {
    let s = Script::Keyframes {
        phases: vec![
            phase(
                0.2,
                1.0,
                Some(([0.1, 0.2, 0.3], [1.0, 2.0, 3.0], 2.5)),
                [0.0; 3],
            ),
            phase(1.0, 1.5, None, [0.3, -0.2, 0.1]),
            // A gap of 0.5 s, then a phase with both motions.
            phase(
                2.0,
                2.7,
                Some(([0.0; 3], [0.0, 1.0, 0.0], -1.0)),
                [0.0, 0.4, 0.0],
            ),
        ],
    };
    let p0 = [0.7, -0.3, 0.2];
    let d = 1e-9;
    for b in [0.2, 1.0, 1.5, 2.0, 2.7] {
        let jump = dist(s.position(p0, b - d), s.position(p0, b + d));
        // Speeds here are below 10 m/s: 2·10⁻⁸ m over 2·10⁻⁹ s.
        assert!(jump < 2e-8, "jump of {jump:e} m at t = {b}");
        let at = dist(s.position(p0, b), s.position(p0, b + d));
        assert!(at < 2e-8, "t = {b}: {at:e} m");
    }
    // Constant before the first window, in the gap and after the last one.
    assert_eq!(s.position(p0, -5.0), p0);
    assert_eq!(s.position(p0, 0.2), p0);
    assert_eq!(s.position(p0, 1.5), s.position(p0, 1.99));
    assert_eq!(s.position(p0, 2.7), s.position(p0, 100.0));
    // And it does move inside a window.
    assert!(dist(s.position(p0, 0.6), p0) > 1e-3);
}

/// `fit` as a number scales about the box centre (which stays); `{ extent, anchor = "min" }`
/// puts the box's minimum corner at the origin; `anchor = "center"` is the number's behaviour.
#[test]
fn fit_anchors_place_the_box() {
    let scene = |fit: &str| {
        let text = format!(
            r#"[simulation]
h = 0.01
steps = 1
[[objects]]
mesh = {{ generator = "box", min = [1.0, 2.0, 3.0], max = [3.0, 2.5, 4.0], cells = [4, 1, 2] }}
transform = {{ fit = {fit} }}
material = {{ model = "fixed_corotated", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }}
"#
        );
        let built = Scene::parse(&scene_path("fit"), &text)
            .and_then(|s| s.build())
            .unwrap_or_else(|e| panic!("fit = {fit}: {e}"));
        built.model.mesh.bounding_box().unwrap()
    };
    // Rest box [1, 3] × [2, 2.5] × [3, 4]: largest extent 2 (x), centre (2, 2.25, 3.5).
    let close = |a: [f64; 3], b: [f64; 3]| dist(a, b) < 1e-12;
    for fit in [
        "1.0",
        "1",
        r#"{ extent = 1.0 }"#,
        r#"{ extent = 1.0, anchor = "center" }"#,
    ] {
        let (lo, hi) = scene(fit);
        assert!(close(lo, [1.5, 2.125, 3.25]), "fit = {fit}: {lo:?}");
        assert!(close(hi, [2.5, 2.375, 3.75]), "fit = {fit}: {hi:?}");
    }
    let (lo, hi) = scene(r#"{ extent = 1.0, anchor = "min" }"#);
    assert!(close(lo, [0.0; 3]), "{lo:?}");
    assert!(close(hi, [1.0, 0.25, 0.5]), "{hi:?}");
}

/// The small TSS bar run to the end: every step converges to CN ε = 1e-5 with Newton, and at
/// every step every pinned vertex sits exactly on its script's position at that time; at the
/// end (twisted by ±90°, then net −0.1 m along x for the x = 0.5 cap) against positions worked
/// out by hand.
#[test]
fn tss_bar_follows_its_keyframes_and_converges_every_step() {
    let path = scene_path("tss_bar");
    let built = Scene::parse(&path, common::TSS_BAR)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(built.model.pins.len(), 2);
    let pins = built.model.pins.clone();
    let mut s = setup(&built, jello::gpu::Backend::Cpu, None).unwrap();
    let mut iterations = Vec::new();
    for step in 1..=built.config.steps {
        let r = s.sim.step(false).unwrap();
        iterations.push(r.iterations);
        assert!(
            r.converged && r.residual < 1e-5,
            "step {step}: {} iterations, residual {:.3e}",
            r.iterations,
            r.residual
        );
        let t = s.sim.state.t;
        for pin in &pins {
            for (&v, &p0) in pin.vertices.iter().zip(&pin.start) {
                let x = &s.sim.state.x[3 * v as usize..3 * v as usize + 3];
                let want = pin.script.position(p0, t);
                assert_eq!(x, &want[..], "step {step}, vertex {v}");
            }
        }
    }
    eprintln!("TSS bar: Newton iterations per step {iterations:?}");
    // The end: the x = +0.5 cap turned +90° about x (y, z) → (−z, y), then moved +0.1 − 0.2.
    let t = s.sim.state.t;
    assert!((t - 0.5).abs() < 1e-12);
    for (pin, sign) in pins.iter().zip([-1.0, 1.0]) {
        for (&v, &p0) in pin.vertices.iter().zip(&pin.start) {
            let want = [p0[0] - sign * 0.1, -sign * p0[2], sign * p0[1]];
            let x = &s.sim.state.x[3 * v as usize..3 * v as usize + 3];
            assert!(
                dist([x[0], x[1], x[2]], want) < 1e-14,
                "vertex {v}: {x:?} vs {want:?}"
            );
        }
    }
}

/// The bundled armadillo TSS (when ../shared is present): it loads with the peers' framing (box
/// minimum at the origin, largest extent 1 m), both handles select vertices at the two ends, its
/// scripts are keyframed, and its first step converges to CN ε = 1e-5 with Newton. The full
/// 120-step run is too slow for the test suite (measured figures: `docs/src/scenes.md`).
#[test]
fn bundled_tss_scene_loads_and_steps() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist_stretch_squash.toml");
    let scene = Scene::load(&path).unwrap();
    for p in &scene.spec.pins {
        assert!(matches!(p.script, ScriptSpec::Keyframes { .. }));
    }
    if common::shared_mesh("armadillo_18k.node").is_none() {
        return;
    }
    let built = scene.build().unwrap();
    let (lo, hi) = built.model.mesh.bounding_box().unwrap();
    assert!(lo.iter().all(|v| v.abs() < 1e-12), "{lo:?}");
    let ext = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
    assert!(
        (ext - 1.0).abs() < 1e-12 && (hi[1] - 1.0).abs() < 1e-12,
        "{hi:?}"
    );
    let m = &built.model;
    assert_eq!(m.pins.len(), 2);
    for (pin, (y_lo, y_hi)) in m.pins.iter().zip([(0.0, 0.06), (0.94, 1.0)]) {
        assert!(pin.vertices.len() >= 10, "{} vertices", pin.vertices.len());
        assert!(pin
            .start
            .iter()
            .all(|p| p[1] >= y_lo - 1e-12 && p[1] <= y_hi + 1e-12));
    }
    let steps = built.config.steps;
    assert!((steps as f64 * built.config.h - 3.0).abs() < 1e-9);
    let mut built = built;
    built.config.steps = 1;
    let opts = RunOptions {
        backend: jello::gpu::Backend::Cpu,
        ..Default::default()
    };
    let (_, stats) = run(&path, built, &opts, |_, r| {
        assert!(r.converged && r.residual < 1e-5, "{r:?}");
    })
    .unwrap();
    assert_eq!(stats.converged_steps, 1);
}
