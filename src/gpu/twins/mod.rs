//! CPU twins of the WGSL kernels: one Rust function per kernel, taking its resources in the
//! shader's binding order (read-only as `&[T]`, read-write as `&mut [T]`) and the same
//! [`Params`](super::Params). They are the CPU backend and the oracle of the GPU tests, so they
//! mirror the WGSL operation for operation (same algorithms, same summation order, f32).
//!
//! Twins never panic on bad data: out-of-range indices or short buffers return
//! `JelloError::Invalid` (the GPU would silently read clamped garbage; the device API validates
//! lengths before dispatching on either backend).

pub mod admm;
pub mod backend;
pub mod broad;
pub mod ccd;
mod element;
pub mod friction;
mod gather;
pub mod hmatrix;
pub mod ipc;
pub mod jgs2;
pub mod linalg;
pub mod material;
pub mod multilevel;
pub mod surface;
pub mod sym12;
pub mod trust;
mod vector;

pub use element::{
    deformation_gradient, elastic, svd3, ELASTIC_ABS, ELASTIC_DIAGONAL, ELASTIC_EXACT_SNH,
    ELASTIC_GRADIENT, ELASTIC_HESSIAN, ELASTIC_PROJECT, ELASTIC_STRICT, ELASTIC_STRICT_SENTINEL,
};
pub use gather::{gather_gradient, gather_hessian_diag, inertia};
pub use hmatrix::{jgs2_hm_backward, jgs2_hm_coupling, jgs2_hm_forward};
pub use jgs2::{
    elastic_list, hess_vec, jgs2_apply, jgs2_combine, jgs2_dots, jgs2_rotation, jgs2_system,
    jgs2_tree_sum, jgs2_trial, jgs2_trial_fine, jgs2_vertex_terms, vbd_system, vertex_solve,
};
pub use surface::{jgs2_edge_terms, jgs2_face_bound, jgs2_face_terms};
pub use vector::{axpy, copy_vec4, reduce_dot, reduce_max_abs, reduce_sum, scale, REDUCE_BLOCK};

use crate::{JelloError, Result};

/// Items per rayon task in the per-element and per-vertex twins.
pub(crate) const CHUNK: usize = 256;

pub(crate) fn need(len: usize, required: usize, what: &str) -> Result<()> {
    if len < required {
        return Err(JelloError::Invalid(format!(
            "{what}: buffer holds {len} items, kernel needs {required}"
        )));
    }
    Ok(())
}
