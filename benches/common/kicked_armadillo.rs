//! The benches' kicked armadillo, one scene text for every bench that runs it (included with
//! `#[path = "common/kicked_armadillo.rs"] mod kicked_armadillo;`).

use std::path::Path;

/// The scene: the armadillo tet mesh `node` (a TetGen `.node` file) in stable Neo-Hookean with
/// Young's modulus `youngs_modulus` (Pa), ν = 0.4, ρ = 1000 kg/m³, h = 10 ms, gravity along −y.
/// y is up (feet at y = −0.5, hands at x = ±0.42, y ≈ 0.3): the left hand (x < −0.37) is
/// pinned; the right foot (x > 0, y < −0.44) is kicked along +z by `kick` (N) for 20 ms, then
/// released.
pub fn scene(node: &Path, youngs_modulus: f64, kick: f64) -> String {
    format!(
        r#"
[simulation]
h = 0.01
steps = 1
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "armadillo"
mesh = {{ file = "{}" }}
material = {{ model = "stable_neo_hookean", youngs_modulus = {youngs_modulus:e}, poisson_ratio = 0.4, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-1.0, -1.0, -1.0], max = [-0.37, 1.0, 1.0] }} }}

[[forces]]
region = {{ box = {{ min = [0.0, -1.0, -1.0], max = [1.0, -0.44, 1.0] }} }}
force = [0.0, 0.0, {kick:?}]
start = 0.0
end = 0.02
"#,
        node.display()
    )
}
