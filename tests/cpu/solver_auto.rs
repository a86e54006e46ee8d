//! `--solver auto` picks as documented (`jello::runner::auto`, the book's solvers page) on a
//! table of bundled and generated scenes, on both backends; `name = "auto"` in a scene runs the
//! pick; a named solver is never replaced.

use jello::gpu::Backend;
use jello::runner::auto::{pick, Facts};
use jello::scene::{BuiltScene, Scene, SolverChoice, SolverKind};
use std::path::{Path, PathBuf};

fn scene_path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(file)
}

/// Bundled scene `file` with each `(from, to)` replaced (each must occur), built.
fn built(file: &str, edits: &[(&str, &str)]) -> BuiltScene {
    let path = scene_path(file);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{file}: no `{from}`");
        text = text.replace(from, to);
    }
    Scene::parse(&path, &text).unwrap().build().unwrap()
}

/// A scene of the table: file, edits, vertices by hand (0: not checked), pick on the CPU, pick
/// on a GPU.
type Row = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    usize,
    SolverKind,
    SolverKind,
);

const MID_TWIST: (&str, &str) = ("cells = [20, 4, 4]", "cells = [40, 8, 8]");
const BIG_TWIST: (&str, &str) = ("cells = [20, 4, 4]", "cells = [40, 10, 10]");

#[test]
fn auto_picks_as_documented_on_a_table_of_scenes() {
    let box_obstacle = "[[obstacles]]\ntype = \"box\"\nmin = [2.0, -1.0, -1.0]\n\
                        max = [3.0, 1.0, 1.0]\n\n[[objects]]";
    let strain = "density = 1000.0, strain_limit = [0.9, 1.1] }";
    let table: [Row; 9] = [
        // 21 × 3 × 3 grid vertices.
        (
            "cantilever.toml",
            vec![],
            189,
            SolverKind::Qn,
            SolverKind::Jgs2,
        ),
        // 21 × 5 × 5.
        ("twist.toml", vec![], 525, SolverKind::Qn, SolverKind::Jgs2),
        // 41 × 9 × 9.
        (
            "twist.toml",
            vec![MID_TWIST],
            3321,
            SolverKind::Qn,
            SolverKind::Jgs2,
        ),
        // 41 × 11 × 11: a larger mesh does not change the CPU pick.
        (
            "twist.toml",
            vec![BIG_TWIST],
            4961,
            SolverKind::Qn,
            SolverKind::Jgs2,
        ),
        // The same with a box obstacle, which JGS2's device path runs too.
        (
            "twist.toml",
            vec![BIG_TWIST, ("[[objects]]", box_obstacle)],
            4961,
            SolverKind::Qn,
            SolverKind::Jgs2,
        ),
        // The same as a static solve.
        (
            "twist.toml",
            vec![BIG_TWIST, ("steps = 80 ", "static = true\nsteps = 80 ")],
            4961,
            SolverKind::Newton,
            SolverKind::Newton,
        ),
        // IPC contact.
        (
            "contact_balls.toml",
            vec![],
            0,
            SolverKind::Newton,
            SolverKind::Newton,
        ),
        (
            "contact_stack.toml",
            vec![],
            3 * 64,
            SolverKind::Newton,
            SolverKind::Newton,
        ),
        // Hard strain limits (a scene naming newton is refused at build).
        (
            "cantilever.toml",
            vec![
                ("density = 1000.0 }", strain),
                ("name = \"newton\"", "name = \"auto\""),
            ],
            189,
            SolverKind::Admm,
            SolverKind::Admm,
        ),
    ];
    for (file, edits, vertices, cpu, gpu) in table {
        let b = built(file, &edits);
        let n = b.model.num_vertices();
        if vertices > 0 {
            assert_eq!(n, vertices, "{file} {edits:?}");
        }
        for (backend, want) in [(Backend::Cpu, cpu), (Backend::Gpu, gpu)] {
            let p = pick(&Facts::of(&b.model, &b.config, backend));
            assert_eq!(
                p.solver, want,
                "{file} {edits:?} on {backend}: {}",
                p.reason
            );
            // The picked solver takes the scene.
            let mut config = b.config.clone();
            config.set_solver(SolverChoice::Named(p.solver));
            let refusal = jello::runner::capabilities::refusal(&config, &b.model);
            assert_eq!(refusal, None, "{file} {edits:?} on {backend}");
        }
    }
}

/// `name = "auto"` runs the pick and says why; `--solver` naming a solver replaces `auto`.
#[test]
fn a_scene_naming_auto_runs_the_pick() {
    let b = built("twist.toml", &[("name = \"newton\"", "name = \"Auto\"")]);
    assert!(b.config.auto_solver);
    let setup = jello::runner::setup(&b, Backend::Cpu, None).unwrap();
    let p = setup.auto.expect("auto resolved");
    assert_eq!(p.solver, SolverKind::Qn);
    assert!(p.reason.contains("525 vertices"), "{}", p.reason);
    assert_eq!(setup.sim.solver_name(), "qn");

    let b = built(
        "twist.toml",
        &[BIG_TWIST, ("name = \"newton\"", "name = \"auto\"")],
    );
    let mut sim = jello::runner::setup(&b, Backend::Cpu, None).unwrap();
    let p = sim.auto.as_ref().expect("auto resolved");
    assert_eq!(p.solver, SolverKind::Qn);
    assert!(p.reason.contains("4961 vertices"), "{}", p.reason);
    assert_eq!(sim.sim.solver_name(), "qn");
    let r = sim.sim.step(false).unwrap();
    assert!(r.converged, "{r:?}");

    let mut named = b.clone();
    named
        .config
        .set_solver(SolverChoice::Named(SolverKind::Newton));
    let setup = jello::runner::setup(&named, Backend::Cpu, None).unwrap();
    assert!(setup.auto.is_none());
    assert_eq!(setup.sim.solver_name(), "newton");
}
