//! IPC's edge–edge mollifier (Li et al. 2020, "Incremental Potential Contact"): the edge–edge
//! barrier is multiplied by m(c), which fades it out as the edges turn parallel, where the
//! closest pair stops being unique and line–line's derivatives blow up.
//!
//! c(x) = ‖(a₁ − a₀) × (b₁ − b₀)‖² (m⁴), and with a threshold ε× (m⁴)
//!
//! m(c) = −c²/ε×² + 2c/ε× for c < ε×, 1 otherwise,
//!
//! which is C¹ at c = ε× (m = 1, m′ = 0) and m(0) = 0. ε× = 10⁻³‖a₀ − a₁‖²‖b₀ − b₁‖² uses the
//! rest lengths (IPC's choice), so it is constant during a solve: the mollifier acts when
//! sin²θ < 10⁻³ at rest-length edges (θ ≲ 1.8°). IPC (and ipc-toolkit) multiply every
//! edge–edge pair by it whatever the pair's distance type, so the pair's barrier is continuous
//! as the edges turn parallel and the type falls back to point–edge; the caller does the same.
//!
//! The mollified barrier is m(x)·b(x); [`mollified`] applies the product rule to both functions'
//! gradients and Hessians.

use super::distance::SecondOrder;
use nalgebra::{Matrix3, Vector3};

type V3 = Vector3<f64>;

/// The factor in ε× = 10⁻³‖a₀ − a₁‖²‖b₀ − b₁‖² (IPC's value).
pub const MOLLIFIER_SCALE: f64 = 1e-3;

/// ε× (m⁴) from the squared rest lengths (m²) of the two edges.
pub fn mollifier_threshold(rest_len_a_sq: f64, rest_len_b_sq: f64) -> f64 {
    MOLLIFIER_SCALE * rest_len_a_sq * rest_len_b_sq
}

/// m(c), dm/dc (1/m⁴) and d²m/dc² (1/m⁸) for threshold `eps` = ε× (m⁴).
pub fn mollifier(c: f64, eps: f64) -> (f64, f64, f64) {
    if c < eps {
        let r = c / eps;
        ((2.0 - r) * r, 2.0 * (1.0 - r) / eps, -2.0 / (eps * eps))
    } else {
        (1.0, 0.0, 0.0)
    }
}

/// c = ‖(a₁ − a₀) × (b₁ − b₀)‖² (m⁴) with its exact derivatives; stencil (a₀, a₁, b₀, b₁).
///
/// With u = a₁ − a₀, v = b₁ − b₀: c = ‖u‖²‖v‖² − (u·v)², so ∂c/∂u = 2(‖v‖²u − (u·v)v),
/// ∂²c/∂u² = 2(‖v‖²I − vvᵀ), ∂²c/∂u∂v = 2(2uvᵀ − vuᵀ − (u·v)I), and symmetrically in v.
pub fn edge_cross_squared(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> SecondOrder<12> {
    let (u, v) = (a1 - a0, b1 - b0);
    let (uu, vv, uv) = (u.norm_squared(), v.norm_squared(), u.dot(&v));
    let cu = (u * vv - v * uv) * 2.0;
    let cv = (v * uu - u * uv) * 2.0;
    let id = Matrix3::identity();
    let cuu = (id * vv - v * v.transpose()) * 2.0;
    let cvv = (id * uu - u * u.transpose()) * 2.0;
    let cuv = (u * v.transpose() * 2.0 - v * u.transpose() - id * uv) * 2.0;
    let mut out = SecondOrder::<12>::constant(u.cross(&v).norm_squared());
    // x = (a₀, a₁, b₀, b₁): u = a₁ − a₀ and v = b₁ − b₀, so vertex k enters with sign sₖ.
    let sign = [-1.0, 1.0, -1.0, 1.0];
    for i in 0..4 {
        let g = if i < 2 { cu } else { cv };
        out.grad
            .fixed_rows_mut::<3>(3 * i)
            .copy_from(&(g * sign[i]));
        for j in 0..4 {
            let block = match (i < 2, j < 2) {
                (true, true) => cuu,
                (false, false) => cvv,
                (true, false) => cuv,
                (false, true) => cuv.transpose(),
            };
            out.hess
                .fixed_view_mut::<3, 3>(3 * i, 3 * j)
                .copy_from(&(block * (sign[i] * sign[j])));
        }
    }
    out
}

/// The mollifier m(c(x)) with its exact derivatives; stencil (a₀, a₁, b₀, b₁), `eps` = ε× (m⁴).
/// Zero derivatives where c ≥ ε×.
pub fn edge_edge_mollifier(a0: &V3, a1: &V3, b0: &V3, b1: &V3, eps: f64) -> SecondOrder<12> {
    let c = (a1 - a0).cross(&(b1 - b0)).norm_squared();
    if c >= eps {
        return SecondOrder::constant(1.0);
    }
    edge_cross_squared(a0, a1, b0, b1).compose(mollifier(c, eps))
}

/// The product m·b with its derivatives: ∇(mb) = m∇b + b∇m, ∇²(mb) = m∇²b + b∇²m + ∇m∇bᵀ +
/// ∇b∇mᵀ (the mollified edge–edge barrier).
pub fn mollified<const N: usize>(m: &SecondOrder<N>, b: &SecondOrder<N>) -> SecondOrder<N> {
    let cross = m.grad * b.grad.transpose();
    SecondOrder {
        value: m.value * b.value,
        grad: b.grad * m.value + m.grad * b.value,
        hess: b.hess * m.value + m.hess * b.value + cross + cross.transpose(),
    }
}
