//! The per-element operator D_e of a linear tet: the map from its four corner positions to the
//! transposed deformation gradient, with constants (translations) in its nullspace.
//!
//! In the row convention of the papers (x is n × 3, one position per row), D_e x = Fᵀ with
//! D_e = Bᵀ Ĉ S_e, B = D_m⁻¹ and Ĉ the 3×4 edge-difference matrix: column a of the 3×4 block
//! is the rest shape-function gradient ∇N_a ([`ElementRest::shape_gradients`]), so
//! (D_e x)_{j,i} = Σ_a ∇N_a\[j\] x_{a,i}. Its rows sum to zero (∇N₀ = −Σ ∇N₁..₃), and the
//! 4×4 block of D_eᵀD_e is ∇N_a·∇N_b — the element's cotangent Laplacian. One n × n matrix
//! therefore serves x, y and z.

use crate::material::ElementRest;
use nalgebra::{Matrix3, Vector3};

/// D_e of one tet: `op[j][a] = ∇N_a[j]` (1/m).
pub type ElementOperator = [[f64; 4]; 3];

/// D_e from the element's rest data.
pub fn element_operator(rest: &ElementRest<f64>) -> ElementOperator {
    let g = rest.shape_gradients();
    let mut op = [[0.0; 4]; 3];
    for (a, ga) in g.iter().enumerate() {
        for j in 0..3 {
            op[j][a] = ga[j];
        }
    }
    op
}

/// D_e x = Fᵀ for the corner positions `x` (m): a 3×3 matrix whose row j is Σ_a ∇N_a\[j\] x_a.
pub fn apply_operator(op: &ElementOperator, x: &[Vector3<f64>; 4]) -> Matrix3<f64> {
    let mut out = Matrix3::zeros();
    for j in 0..3 {
        for (a, xa) in x.iter().enumerate() {
            for i in 0..3 {
                out[(j, i)] += op[j][a] * xa[i];
            }
        }
    }
    out
}

/// The 4×4 block of D_eᵀD_e: `[a][b] = ∇N_a·∇N_b` (1/m²).
pub fn operator_gram(op: &ElementOperator) -> [[f64; 4]; 4] {
    let mut out = [[0.0; 4]; 4];
    for a in 0..4 {
        for b in 0..4 {
            out[a][b] = (0..3).map(|j| op[j][a] * op[j][b]).sum();
        }
    }
    out
}
