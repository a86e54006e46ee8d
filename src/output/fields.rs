//! Per-element quantities a VTU frame carries as cell data: J = det F, von Mises stress, and
//! the material and object ids, all in f64 from the CPU reference `Model`.

use crate::material::{pk1, Material};
use crate::problem::Model;
use nalgebra::{Matrix3, Vector3};

/// One value per tet of the combined mesh.
#[derive(Clone, Debug, PartialEq)]
pub struct CellFields {
    /// J = det F (dimensionless volume ratio; ≤ 0 for an inverted tet).
    pub j: Vec<f64>,
    /// Von Mises stress of the Cauchy stress, Pa (see [`von_mises`]).
    pub von_mises: Vec<f64>,
    /// Material id (see [`material_ids`]).
    pub material_id: Vec<i32>,
    /// Index of the tet's object (body) in the scene's `[[objects]]` order.
    pub object_id: Vec<i32>,
}

/// Von Mises stress (Pa) of `material` at deformation gradient `f`: the Cauchy stress
/// σ = P Fᵀ / J from the first Piola–Kirchhoff stress P (Pa), then √(3/2 · dev σ : dev σ).
/// J = 0 gives a non-finite value, as the Cauchy stress of a collapsed tet is undefined.
pub fn von_mises(material: &Material, f: &Matrix3<f64>) -> f64 {
    let j = f.determinant();
    let sigma = pk1(material, f) * f.transpose() / j;
    let dev = sigma - Matrix3::identity() * (sigma.trace() / 3.0);
    (1.5 * dev.component_mul(&dev).sum()).sqrt()
}

/// Per tet, the index of its material among the model's distinct materials, numbered in the
/// order their first tet appears. Ids follow values, not scene entries: two objects (or a
/// region) given equal parameters share an id, since ParaView can only show what differs.
pub fn material_ids(model: &Model) -> Vec<i32> {
    let mut seen: Vec<Material> = Vec::new();
    model
        .materials
        .iter()
        .map(|m| {
            let id = match seen.iter().position(|s| s == m) {
                Some(i) => i,
                None => {
                    seen.push(*m);
                    seen.len() - 1
                }
            };
            id as i32
        })
        .collect()
}

/// The cell fields of `model` at flattened positions `x` (m, 3n).
pub fn cell_fields(model: &Model, x: &[f64]) -> CellFields {
    let vertex = |i: u32| {
        let i = 3 * i as usize;
        Vector3::new(x[i], x[i + 1], x[i + 2])
    };
    let (j, von_mises): (Vec<f64>, Vec<f64>) = model
        .mesh
        .tets
        .iter()
        .zip(&model.rest)
        .zip(&model.materials)
        .map(|((t, rest), m)| {
            let f = rest.deformation_gradient(&t.map(vertex));
            (f.determinant(), von_mises(m, &f))
        })
        .unzip();
    let mut object_id = vec![0; model.mesh.tets.len()];
    for (b, body) in model.bodies.iter().enumerate() {
        object_id[body.tets.clone()].fill(b as i32);
    }
    CellFields {
        j,
        von_mises,
        material_id: material_ids(model),
        object_id,
    }
}
