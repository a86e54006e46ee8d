//! The book's "a minute's start" (docs/src/embedding.md): load a scene, step it on the CPU with
//! the scene's own solver, read the state. Run from the repository root:
//! `cargo run --example step_cpu`.

// ANCHOR: book
use jello::runner::make_solver;
use jello::scene::Scene;
use jello::sim::Simulation;

fn main() -> anyhow::Result<()> {
    let built = Scene::load("assets/scenes/drop.toml".as_ref())?.build()?; // parse + checks
    let solver = make_solver(&built.config, &built.model, None)?; // the scene's [solver]
    let state = built.model.initial_state(&built.velocity);
    let mut sim = Simulation::new(built.model.clone(), state, built.config.h, solver)?;
    for _ in 0..20 {
        let report = sim.step(false)?; // false: no per-iteration trace
        let (iterations, residual) = (report.iterations, report.residual);
        println!("{iterations} iterations, residual {residual:.2e}");
    }
    let x: &[f64] = &sim.state.x; // positions, m, flattened [x0 y0 z0 x1 …]
    println!("first vertex at {:?}", &x[..3]);
    Ok(())
}
// ANCHOR_END: book
