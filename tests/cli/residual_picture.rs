//! The per-vertex residual picture (`jello run --png --residual-iteration K`): the colour map is
//! monotone in lightness and value, the capped re-solve stops after K iterations with the
//! residual the picture's legend states (checked against ‖∇E‖ per vertex computed here from
//! `StepProblem::gradient`), the PNG frames differ from the plain shading where the body is,
//! and bad values are errors naming the flag. CPU only (the picture is drawn by the CPU
//! rasterizer).

use crate::common;

use jello::output::FramePainter;
use jello::problem::StepProblem;
use jello::render::{viridis, LogScale};
use jello::runner::ResidualProbe;
use jello::scene::Scene;
use std::path::{Path, PathBuf};

/// A soft cantilever sagging under gravity, solved tightly (ε = 1e-9) so Newton takes several
/// iterations per step.
const SAG: &str = r#"[simulation]
h = 0.02
steps = 2
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"
tolerance = 1e-9

[output]
png_size = [200, 150]

[[objects]]
name = "beam"
mesh = { generator = "box", min = [0.0, -0.05, -0.05], max = [1.0, 0.05, 0.05], cells = [10, 2, 2] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e4, poisson_ratio = 0.3, density = 1000.0 }

[[pins]]
region = { box = { min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] } }
"#;

/// Relative luminance of an sRGB colour (Rec. 709 weights on linear channels).
fn luminance(c: [f32; 3]) -> f32 {
    let l = c.map(jello::render::srgb_to_linear);
    0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]
}

#[test]
fn colour_map_is_monotone() {
    let mut last = -1.0f32;
    for i in 0..=200 {
        let y = luminance(viridis(i as f32 / 200.0));
        assert!(
            y > last,
            "lightness falls at t = {}: {y} after {last}",
            i as f32 / 200.0
        );
        last = y;
    }
    // Outside [0, 1] it clamps.
    assert_eq!(viridis(-1.0), viridis(0.0));
    assert_eq!(viridis(2.0), viridis(1.0));
    // The log scale: ends at 0 and 1, increasing between, no position for non-positive values.
    let s = LogScale::spanning(&[3e-7, 0.0, 2e-3, 5e-5, f64::NAN]).unwrap();
    assert_eq!((s.min, s.max), (3e-7, 2e-3));
    assert_eq!(s.position(3e-7), Some(0.0));
    assert_eq!(s.position(2e-3), Some(1.0));
    let mut last = -1.0f32;
    for k in 0..=100 {
        let v = 3e-7 * (2e-3f64 / 3e-7).powf(k as f64 / 100.0);
        let p = s.position(v).unwrap();
        assert!(p >= last, "{v}: {p} after {last}");
        last = p;
    }
    assert_eq!(s.position(0.0), None);
    assert_eq!(s.position(-1.0), None);
}

/// One step of SAG re-solved with K = 1: the probe ran one iteration, its per-vertex norms are
/// ‖∇E‖ at the iterate it returns (recomputed here), pinned vertices are 0, one iteration
/// leaves more residual than converging, and the painted legend states exactly the smallest and
/// largest norm of the free vertices.
#[test]
fn probe_norms_and_legend_match_the_gradient() {
    let dir = common::cli::tmp_dir("residual", "legend");
    let path = dir.join("sag.toml");
    let built = Scene::parse(&path, SAG).unwrap().build().unwrap();
    let model = &built.model;
    let state = model.initial_state(&built.velocity);
    let h = built.config.h;
    let mut one = ResidualProbe::new(&built.config, model, None, 1).unwrap();
    let field = one.probe(model, &state, h, None).unwrap();
    assert_eq!(field.iterations, 1);
    // Independently: the step's problem, its gradient at the returned iterate, norms per vertex.
    let problem = StepProblem::new(model, &state, h);
    let mut g = vec![0.0; field.x.len()];
    problem.gradient(model, &field.x, &mut g);
    let mut lo = f64::INFINITY;
    let mut hi = 0.0f64;
    for v in 0..model.num_vertices() {
        let pinned = problem.fixed[3 * v];
        assert_eq!(field.pinned[v], pinned);
        let n = (g[3 * v].powi(2) + g[3 * v + 1].powi(2) + g[3 * v + 2].powi(2)).sqrt();
        if pinned {
            assert_eq!(field.norms[v], 0.0);
        } else {
            assert!(
                (field.norms[v] - n).abs() <= 1e-12 * n.max(1e-300),
                "vertex {v}: {} vs {n}",
                field.norms[v]
            );
            lo = lo.min(n);
            hi = hi.max(n);
        }
    }
    assert!(field.pinned.iter().any(|&p| p) && lo > 0.0 && hi > lo);
    // K = 1 is a real cap: converging leaves a much smaller largest residual.
    let mut many = ResidualProbe::new(&built.config, model, None, 50).unwrap();
    let converged = many.probe(model, &state, h, None).unwrap();
    assert!(
        converged.iterations > 1,
        "{} iterations",
        converged.iterations
    );
    let hi50 = converged.norms.iter().copied().fold(0.0, f64::max);
    assert!(hi50 < 0.5 * hi, "K = 50: {hi50:e} N vs K = 1: {hi:e} N");

    let painter = FramePainter::new(model, (200, 150), false).unwrap();
    let png = dir.join("field.png");
    let (image, scale) = painter
        .paint_field(&field.x, &field.norms, "N", "‖∇E‖ after 1 it", &png)
        .unwrap();
    let scale = scale.expect("positive norms");
    assert!(
        (scale.min - lo).abs() <= 1e-12 * lo,
        "{} vs {lo}",
        scale.min
    );
    assert!(
        (scale.max - hi).abs() <= 1e-12 * hi,
        "{} vs {hi}",
        scale.max
    );
    assert!(png.exists());
    // The colour bar: its top is viridis(1) (yellow), its bottom viridis(0) (purple), both
    // present in the image's right third.
    let has = |c: [f32; 3]| {
        let want = c.map(|v| (v * 255.0).round() as u8);
        (0..image.height).any(|y| {
            (image.width * 2 / 3..image.width).any(|x| image.get(x, y).unwrap()[..3] == want)
        })
    };
    assert!(has(viridis(1.0)) && has(viridis(0.0)), "no colour bar");
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_png(path: &Path) -> Vec<u8> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dec = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    dec.next_frame(&mut buf).unwrap();
    buf
}

/// Through the binary: a plain `--png` run and a `--residual-iteration 1` run of the same
/// scene write the same frame 0 (the initial state, plain shading in both) and different later
/// frames: the body's orange is gone, replaced by the map's colours.
#[test]
fn residual_frames_differ_from_plain_shading() {
    let dir = common::cli::tmp_dir("residual", "cli");
    let scene = dir.join("sag.toml");
    std::fs::write(&scene, SAG).unwrap();
    let run = |out: &PathBuf, extra: &[&str]| {
        let o = common::cli::run_cpu(&scene, out, &[&["--png"], extra].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let plain = dir.join("plain");
    let field = dir.join("field");
    run(&plain, &[]);
    run(&field, &["--residual-iteration", "1"]);
    let frame = |d: &PathBuf, n: usize| read_png(&d.join(format!("frames/frame_{n:05}.png")));
    assert_eq!(
        frame(&plain, 0),
        frame(&field, 0),
        "frame 0 is plain in both"
    );
    // Orange: red well above green and blue (background, ground and viridis never are; its
    // yellow end has red only ~20 above green).
    let orange = |b: &[u8]| {
        b.chunks_exact(4)
            .filter(|p| p[0] as i32 - p[1] as i32 > 50 && p[0] as i32 - p[2] as i32 > 60)
            .count()
    };
    for n in [1, 2] {
        let (a, b) = (frame(&plain, n), frame(&field, n));
        let differ = a
            .chunks_exact(4)
            .zip(b.chunks_exact(4))
            .filter(|(p, q)| p != q)
            .count();
        assert!(orange(&a) > 300, "frame {n}: the plain body is orange");
        assert_eq!(
            orange(&b),
            0,
            "frame {n}: the residual picture has no orange"
        );
        assert!(differ > 300, "frame {n}: only {differ} pixels differ");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_residual_iterations_are_errors() {
    let dir = common::cli::tmp_dir("residual", "bad");
    let scene = dir.join("sag.toml");
    std::fs::write(&scene, SAG).unwrap();
    let s = scene.to_str().unwrap();
    // Not a positive integer: clap's error, the flag and the value on the first line (exit 2,
    // as for --steps).
    for v in ["0", "1.5", "abc", "-2"] {
        let o = common::cli::jello(&["run", s, "--png", "--residual-iteration", v]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{v}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ")
                && first.contains("--residual-iteration")
                && first.contains(v),
            "{v}: {first}"
        );
    }
    // Without PNG output: one line, exit 1, nothing written.
    let out = dir.join("out");
    let o = common::cli::jello(&[
        "run",
        s,
        "--backend",
        "cpu",
        "--residual-iteration",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--residual-iteration") && err.contains("--png"),
        "{err}"
    );
    assert!(!out.join("manifest.json").exists());
    // The library checks the range too.
    let built = Scene::parse(&scene, SAG).unwrap().build().unwrap();
    let e = ResidualProbe::new(&built.config, &built.model, None, 0)
        .err()
        .expect("K = 0 refused")
        .to_string();
    assert!(
        e.contains("--residual-iteration") && !e.contains('\n'),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
