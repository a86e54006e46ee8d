//! The book's adjoint example (docs/src/gradients.md): record 20 implicit-Euler steps of the
//! cantilever, then differentiate L = ½‖x²⁰ − target‖² with respect to every tet's Young's
//! modulus and density. Run from the repository root: `cargo run --example gradient`.

// ANCHOR: book
use jello::adjoint::{Param, RecordOptions, Seeds, Tape, Unconverged};
use jello::scene::Scene;

fn main() -> anyhow::Result<()> {
    let built = Scene::load("assets/scenes/cantilever.toml".as_ref())?.build()?;
    let state = built.model.initial_state(&built.velocity);
    // 20 implicit-Euler steps solved by f64 Newton to CN 1e-10 (the default tolerance).
    let options = RecordOptions::default();
    let mut tape = Tape::record(built.model.clone(), state, built.config.h, 20, options)?;
    // L = ½‖x²⁰ − target‖²: dL/dx at step 20 (3n values, [L]/m); tape.state() is the last state.
    let target = vec![0.0; tape.state().x.len()];
    let mut seeds = Seeds::default();
    let dx = tape.state().x.iter().zip(&target).map(|(a, b)| a - b);
    seeds.x.insert(20, dx.collect());
    let wrt = [Param::YoungsModulus, Param::Density];
    let (grads, stats) = tape.backward(&seeds, &wrt, Unconverged::Refuse)?;
    let dl_de = grads.youngs_modulus.unwrap(); // per tet, [L]/Pa
    let (first, tets) = (dl_de[0], dl_de.len());
    println!("dL/dE of tet 0: {first:.3e} per Pa ({tets} tets)");
    let (back, fwd) = (stats.backward_ms, stats.forward_ms);
    println!("backward pass {back:.0} ms, forward {fwd:.0} ms");
    Ok(())
}
// ANCHOR_END: book
