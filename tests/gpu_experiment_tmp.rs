mod common;
use jello::gpu::Device;
use jello::problem::{State, StepProblem};
use jello::scene::Scene;
use jello::solver::jgs2::{build_subspace, DeviceJgs2, Jgs2Params, Jgs2Solver, SubspaceOptions, Variant};
use jello::solver::StepSolver;
use nalgebra::Vector3;
use std::path::Path;
use std::sync::Arc;

fn scene(obs: &str, v: &str) -> String {
    format!(r#"
[simulation]
h = 0.01
steps = 3
gravity = [0.0, 0.0, 0.0]
[[objects]]
name = "ball"
mesh = {{ generator = "ball", center = [-0.15, 0.0, 0.0], radius = 0.1, resolution = 4 }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 5e4, poisson_ratio = 0.4, density = 1000.0 }}
velocity = {v}
{obs}
[contact]
dhat = DHAT
"#).replace("DHAT", &std::env::var("DHAT").unwrap())
}

#[test]
fn experiment() {
    let cases = [
        ("graze sphere", "[[obstacles]]\ntype = \"sphere\"\ncenter = [0.0, -0.1, 0.013]\nradius = 0.01\n", "[3.0, 0.0, 0.0]"),
        ("graze ridge", "[[obstacles]]\ntype = \"box\"\nmin = [-0.004, -0.3, -0.3]\nmax = [0.004, -0.08, 0.3]\n", "[3.0, 0.0, 0.0]"),
    ];
    for (label, obs, v) in cases.into_iter() {
        let b = Scene::parse(Path::new("t.toml"), &scene(obs, v)).unwrap().build().unwrap();
        let m = &b.model;
        let o = &m.obstacles[0];
        let sub = Arc::new(build_subspace(m, 0.01, &SubspaceOptions::default()).unwrap());
        for (name, jgs2, variant, safeguard) in [("vbd", false, Variant::GaussSeidel, false), ("jgs2", true, Variant::Jacobi, true)] {
            for dev in ["f64", "gpu"] {
                let params = Jgs2Params { max_iterations: 400, variant, safeguard, ..Default::default() };
                let mut solver: Box<dyn StepSolver> = match dev {
                    "newton" => Box::new(jello::solver::NewtonSolver::new(m, jello::solver::NewtonParams::default()).unwrap()),
                    "f64" => if jgs2 { Box::new(Jgs2Solver::jgs2(m, params, sub.clone()).unwrap()) } else { Box::new(Jgs2Solver::vbd(m, params)) },
                    _ => {
                        let d = if dev == "cpu" { Device::cpu() } else { common::gpu_device().unwrap() };
                        Box::new(DeviceJgs2::new(d, m, params, jgs2.then(|| sub.clone())).unwrap())
                    }
                };
                let mut st: State = m.initial_state(&b.velocity);
                let t = std::time::Instant::now();
                let (mut its, mut pen, mut dist) = (vec![], vec![], vec![]);
                for _ in 0..12 {
                    let p = StepProblem::new(m, &st, 0.01);
                    let mut x = Vec::new();
                    let r = solver.step(&p, m, &mut x, false).unwrap();
                    let c = m.check_state(&x);
                    let at = |v: u32| Vector3::new(x[3 * v as usize], x[3 * v as usize + 1], x[3 * v as usize + 2]);
                    let md = m.surface.triangles.iter().map(|t| o.triangle_distance(&t.map(at))).fold(f64::INFINITY, f64::min);
                    its.push(if r.converged { r.iterations as i64 } else { -(r.iterations as i64) }); pen.push(c.total_penetrations()); dist.push(format!("{md:.0e}"));
                    let v = x.iter().zip(&st.x).map(|(a, b)| (a - b) / 0.01).collect();
                    st = State { x, v, t: st.t + 0.01 };
                }
                eprintln!("{label} {name} {dev} ({:.1?}): its {its:?} pen {pen:?} dist {dist:?}", t.elapsed());
            }
        }
    }
}
