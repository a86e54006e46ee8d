//! Linear-solver work in `stats.json` (issue 42): every step carries `work`; ADMM's residuals
//! there are its last `--trace` record's, its refactorisations are counted (the run's first
//! factor at step 1, at most the penalty's cap of updates after), and the L-BFGS solvers'
//! line-search trials are at least one per traced iteration.

use crate::common;
use common::cli::{jello, tmp_dir};
use std::path::Path;

fn run(test: &str, solver: &str) -> Vec<serde_json::Value> {
    let dir = tmp_dir("work", test);
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let out_dir = dir.join("out");
    let out = jello(&[
        "run",
        scene.to_str().unwrap(),
        "--steps",
        "3",
        "--backend",
        "cpu",
        "--solver",
        solver,
        "--trace",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jello run failed: {stderr}");
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("stats.json")).unwrap()).unwrap();
    stats["steps"].as_array().unwrap().clone()
}

#[test]
fn stats_work_is_present_and_agrees_with_the_trace() {
    for (i, s) in run("admm", "admm").iter().enumerate() {
        let work = &s["work"];
        let trace = s["trace"].as_array().expect("--trace");
        let last = trace.last().unwrap();
        assert_eq!(work["primal"], last["primal"], "step {i}");
        assert_eq!(work["dual"], last["dual"], "step {i}");
        let refactor = work["refactorisations"].as_u64().unwrap();
        // Step 1 makes the run's factor; the penalty update adds at most 4 per step.
        assert!(
            refactor >= u64::from(i == 0) && refactor <= 5,
            "step {i}: {refactor}"
        );
        assert_eq!(work["line_search_trials"], 0);
    }
    for solver in ["qn", "dot"] {
        for (i, s) in run(solver, solver).iter().enumerate() {
            let work = &s["work"];
            let traced = s["trace"].as_array().unwrap().len() as u64 - 1;
            let trials = work["line_search_trials"].as_u64().unwrap();
            assert!(
                trials >= traced && trials > 0,
                "{solver} step {i}: {trials}"
            );
            assert_eq!(work["refactorisations"], 0);
            assert!(work.get("primal").is_none());
        }
    }
}
