//! Per-tetrahedron energy, gradient and Hessian of linear FEM: F = Ds·Dm⁻¹, Ψ_e = V·Ψ(F),
//! ∇Ψ_e = V·Bᵀ vec(P), ∇²Ψ_e = V·Bᵀ (∂P/∂F) B, where B = ∂vec(F)/∂x is built from the rest
//! shape-function gradients.

use super::{
    c, dpdf_reference, evaluate, evaluate_filtered, filtered_modes_of, stress_and_block,
    stress_and_exact_block, stress_needs_svd, svd3_fast, svd3_fast_lanes, svd_stress, EigenFilter,
    Material, MaterialModel, SigmaModes, Svd3,
};
use nalgebra::{Matrix3, RealField, SMatrix, SVector, Vector3};

/// Rest-state data of one tet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElementRest<T: RealField + Copy> {
    /// Inverse of the rest edge matrix Dm = [X1−X0, X2−X0, X3−X0], 1/m.
    pub dm_inv: Matrix3<T>,
    /// Rest volume, m³ (positive).
    pub volume: T,
}

impl ElementRest<f64> {
    /// Rest data from the four rest positions (m); `None` when the tet is degenerate or inverted.
    pub fn new(x: &[[f64; 3]; 4]) -> Option<Self> {
        let p = x.map(Vector3::from);
        let dm = Matrix3::from_columns(&[p[1] - p[0], p[2] - p[0], p[3] - p[0]]);
        let det = dm.determinant();
        if !(det.is_finite() && det > 0.0) {
            return None;
        }
        Some(ElementRest {
            dm_inv: dm.try_inverse()?,
            volume: det / 6.0,
        })
    }

    /// Converts to another scalar type (f32 for the GPU twins).
    pub fn cast<T: RealField + Copy>(&self) -> ElementRest<T> {
        ElementRest {
            dm_inv: self.dm_inv.map(|v| c(v)),
            volume: c(self.volume),
        }
    }
}

impl<T: RealField + Copy> ElementRest<T> {
    /// Gradients of the four linear shape functions at rest (1/m): ∇N₁..₃ are the rows of Dm⁻¹,
    /// ∇N₀ = −(∇N₁ + ∇N₂ + ∇N₃).
    pub fn shape_gradients(&self) -> [Vector3<T>; 4] {
        let g1 = self.dm_inv.row(0).transpose();
        let g2 = self.dm_inv.row(1).transpose();
        let g3 = self.dm_inv.row(2).transpose();
        [-(g1 + g2 + g3), g1, g2, g3]
    }

    /// F = Ds · Dm⁻¹ at current positions `x` (m).
    pub fn deformation_gradient(&self, x: &[Vector3<T>; 4]) -> Matrix3<T> {
        let ds = Matrix3::from_columns(&[x[1] - x[0], x[2] - x[0], x[3] - x[0]]);
        ds * self.dm_inv
    }
}

/// One tet's energy (J), gradient (N, vertex-major) and optionally Hessian (N/m).
#[derive(Clone, Copy, Debug)]
pub struct ElementState<T: RealField + Copy> {
    /// V·Ψ(F), J.
    pub energy: T,
    /// ∂(VΨ)/∂x, 12 entries.
    pub gradient: SVector<T, 12>,
    /// ∂²(VΨ)/∂x², when requested.
    pub hessian: Option<SMatrix<T, 12, 12>>,
}

/// Energy V·Ψ(F) of one tet, J.
pub fn element_energy<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
) -> T {
    let f = rest.deformation_gradient(x);
    evaluate(m, &f, false, false).psi * rest.volume
}

/// Energy and gradient of one tet.
pub fn element_gradient<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
) -> ElementState<T> {
    element_eval(m, rest, x, false, None)
}

/// Corner `a`'s rows of one tet's gradient (N) and its diagonal 3×3 block of the Hessian (N/m),
/// ∂P/∂F's eigenvalues passed through `filter`: what a per-vertex solver needs from an incident
/// element, without the 12×12 Hessian. Equal to [`element_hessian_filtered`]'s rows and
/// (a, a) block up to round-off ([`super::stress_and_block`]).
pub fn element_corner<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    a: usize,
    filter: Option<EigenFilter>,
) -> (Vector3<T>, Matrix3<T>) {
    let f = rest.deformation_gradient(x);
    let ga = rest.shape_gradients()[a];
    let (p, k) = stress_and_block(m, &f, &ga, filter);
    let vol = rest.volume;
    (p * ga * vol, k * vol)
}

/// Corner `a`'s gradient rows (N) and the diagonal block (N/m) a per-vertex Newton step (VBD)
/// solves with: the tet's exact diagonal Hessian block where it is PSD by construction
/// ([`super::stress_and_exact_block`]: the stable Neo-Hookeans, closed form, no SVD), else the
/// (a, a) block of the Hessian with ∂P/∂F's eigenvalues passed through `fallback`
/// ([`element_corner`]).
pub fn element_local_corner<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    a: usize,
    fallback: Option<EigenFilter>,
) -> (Vector3<T>, Matrix3<T>) {
    let f = rest.deformation_gradient(x);
    let ga = rest.shape_gradients()[a];
    let (p, k) = stress_and_exact_block(m, &f, &ga)
        .unwrap_or_else(|| stress_and_block(m, &f, &ga, fallback));
    let vol = rest.volume;
    (p * ga * vol, k * vol)
}

/// Energy, gradient and Hessian of one tet; `project` makes the Hessian PSD (by projecting ∂P/∂F,
/// which keeps V·Bᵀ(∂P/∂F)B PSD).
pub fn element_hessian<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    project: bool,
) -> ElementState<T> {
    element_eval(m, rest, x, true, project.then_some(EigenFilter::Clamp))
}

/// Energy, gradient and Hessian of one tet, ∂P/∂F's eigenvalues passed through `filter` (`None`:
/// the true Hessian; `Some(_)`: PSD).
pub fn element_hessian_filtered<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    filter: Option<EigenFilter>,
) -> ElementState<T> {
    element_eval(m, rest, x, true, filter)
}

fn element_eval<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    want_hessian: bool,
    filter: Option<EigenFilter>,
) -> ElementState<T> {
    let f = rest.deformation_gradient(x);
    let g = rest.shape_gradients();
    let vol = rest.volume;
    if want_hessian && m.model != MaterialModel::Linear {
        return element_eval_modes(m, svd3_fast(&f), &g, vol, filter);
    }
    let s = evaluate_filtered(m, &f, want_hessian, filter);
    let hessian = s.dpdf.map(|d| contract_dpdf(&d, &g, vol));
    ElementState {
        energy: s.psi * vol,
        gradient: gradient_of(&s.p, &g, vol),
        hessian,
    }
}

/// The element gradient V·Bᵀ vec(P) (N, vertex-major): corner a's rows V·P∇N_a.
fn gradient_of<T: RealField + Copy>(p: &Matrix3<T>, g: &[Vector3<T>; 4], vol: T) -> SVector<T, 12> {
    let mut gradient = SVector::<T, 12>::zeros();
    for a in 0..4 {
        let fa = p * g[a] * vol;
        for i in 0..3 {
            gradient[3 * a + i] = fa[i];
        }
    }
    gradient
}

/// [`element_gradient`] of `L` tets at once (materials, rest data and corner positions per
/// lane), each state handed to `each(l, state)`; bit-identical to calling it on each. For the
/// models whose P needs F's SVD (the corotated family) the SVDs' Jacobi eigen-solves — one
/// dependent chain of square roots and divisions per element, most of a gradient pass — run
/// in lock-step ([`svd3_fast_lanes`]) as in the Hessian passes; lanes whose P comes from the
/// invariants or the linear model take the scalar route, and a group with no SVD lane takes
/// no SVD.
pub fn element_gradients_lanes<T: RealField + Copy, const L: usize>(
    m: [&Material; L],
    rest: [&ElementRest<T>; L],
    x: &[[Vector3<T>; 4]; L],
    mut each: impl FnMut(usize, ElementState<T>),
) {
    let needs_svd: [bool; L] = std::array::from_fn(|l| stress_needs_svd(m[l].model));
    if !needs_svd.iter().any(|&n| n) {
        for l in 0..L {
            each(l, element_eval(m[l], rest[l], &x[l], false, None));
        }
        return;
    }
    let f: [Matrix3<T>; L] = std::array::from_fn(|l| rest[l].deformation_gradient(&x[l]));
    let svd = svd3_fast_lanes(&f);
    for l in 0..L {
        if !needs_svd[l] {
            each(l, element_eval(m[l], rest[l], &x[l], false, None));
            continue;
        }
        let (psi, p) = svd_stress(m[l], &svd[l]);
        let vol = rest[l].volume;
        each(
            l,
            ElementState {
                energy: psi * vol,
                gradient: gradient_of(&p, &rest[l].shape_gradients(), vol),
                hessian: None,
            },
        );
    }
}

/// Tets per call of [`element_hessians_filtered_lanes`] in the element Hessian passes (Newton's
/// assembly, JGS2's element pass). Four independent SVD eigen-solves fill the core's
/// square-root and division units (two SSE2 vectors, or one AVX2 one) where one element's
/// chain left them waiting: measured in `cargo bench --bench newton`'s assembly phases
/// (`docs/src/benchmarks/cpu-speed.md`, issue 15 part 6).
pub const ELEMENT_LANES: usize = 4;

/// [`element_hessian_filtered`] of `L` tets at once (materials, rest data and corner positions
/// per lane), each state handed to `each(l, state)`; bit-identical to calling it on each. Their
/// SVDs' Jacobi eigen-solves run in lock-step ([`svd3_fast_lanes`]), whose square-root and
/// division chains one element alone leaves the core waiting on; the rest is per element, and
/// each state goes to `each` as it is made (returning the `L` states as an array cost a
/// `memmove` of 5% of Newton's assembly). Linear-elastic lanes take their own route (their SVD
/// is taken and unused).
pub fn element_hessians_filtered_lanes<T: RealField + Copy, const L: usize>(
    m: [&Material; L],
    rest: [&ElementRest<T>; L],
    x: &[[Vector3<T>; 4]; L],
    filter: Option<EigenFilter>,
    mut each: impl FnMut(usize, ElementState<T>),
) {
    let f: [Matrix3<T>; L] = std::array::from_fn(|l| rest[l].deformation_gradient(&x[l]));
    let svd = svd3_fast_lanes(&f);
    for l in 0..L {
        each(
            l,
            if m[l].model == MaterialModel::Linear {
                element_eval(m[l], rest[l], &x[l], true, filter)
            } else {
                element_eval_modes(
                    m[l],
                    svd[l],
                    &rest[l].shape_gradients(),
                    rest[l].volume,
                    filter,
                )
            },
        );
    }
}

/// [`element_eval`] with the Hessian built from ∂P/∂F's modes ([`filtered_modes_of`]): with
/// z_k = (M_k∇N₀, …, M_k∇N₃) ∈ ℝ¹², H = V Σ_k λ_k z_k z_kᵀ, and for the three scaling modes
/// where the filter leaves them alone the σ-space Hessian whole, Y H_σ Yᵀ (Y = 12×3,
/// Y\[3a+i, j\] = U_ij (Vᵀ∇N_a)_j), instead of forming the 9×9 ∂P/∂F and contracting it twice
/// with the shape gradients. Equal to that contraction up to round-off.
///
/// The modes' columns (at most 9: six flip/twist and three scaling, or nine single modes) are
/// collected for corners 1–3 as Z (9×9) and W = Z·diag(λ) (Y H_σ for the scaling block), and
/// the upper triangle of those corners' blocks is written once as W Zᵀ (45 entries), instead
/// of one read-modify-write pass per mode. Corner 0's blocks follow from them, as
/// ∇N₀ = −(∇N₁ + ∇N₂ + ∇N₃): H₀_b = −Σ_a H_ab, H₀₀ = −Σ_b H₀_b (the 78 entries of the whole
/// upper triangle took 1.7× the multiply-adds). z_k's corner parts are U (Q_k (Vᵀ∇N_a)) with
/// Vᵀ∇N_a computed once per element, not (U Q_k Vᵀ)∇N_a (two 3×3 products per mode).
fn element_eval_modes<T: RealField + Copy>(
    m: &Material,
    svd: Svd3<T>,
    g: &[Vector3<T>; 4],
    vol: T,
    filter: Option<EigenFilter>,
) -> ElementState<T> {
    // Row r of Z and W: the entry of DOF 3 + r (corners 1–3) of each mode column. Corner 0's
    // rows are not formed: ∇N₀ = −(∇N₁ + ∇N₂ + ∇N₃), so its blocks follow from the others'
    // (below), and the product W Zᵀ runs over 9 rows instead of 12 (45 entries of 9 terms
    // instead of 78).
    let mut z = [[T::zero(); 9]; 9];
    let mut w = [[T::zero(); 9]; 9];
    let mut k = 0usize;
    // Vᵀ∇N_a per corner 1–3, from the first mode's SVD (every mode of one call shares it).
    let mut vg: Option<[Vector3<T>; 3]> = None;
    let (psi, p, _) = filtered_modes_of(m, svd, filter, true, |svd, modes| {
        let vg = *vg.get_or_insert_with(|| std::array::from_fn(|a| svd.v.tr_mul(&g[a + 1])));
        match modes {
            SigmaModes::One(lambda, q) => {
                for a in 0..3 {
                    let za = svd.u * (q * vg[a]);
                    for i in 0..3 {
                        z[3 * a + i][k] = za[i];
                        w[3 * a + i][k] = lambda * za[i];
                    }
                }
                k += 1;
            }
            SigmaModes::Scaling(hs) => {
                for (a, vga) in vg.iter().enumerate() {
                    for i in 0..3 {
                        let row = 3 * a + i;
                        for j in 0..3 {
                            z[row][k + j] = svd.u[(i, j)] * vga[j];
                        }
                        for j in 0..3 {
                            w[row][k + j] = z[row][k] * hs[(0, j)]
                                + z[row][k + 1] * hs[(1, j)]
                                + z[row][k + 2] * hs[(2, j)];
                        }
                    }
                }
                k += 3;
            }
        }
    });
    debug_assert!(k <= 9);
    let mut h = SMatrix::<T, 12, 12>::zeros();
    // Corners 1–3: the upper triangle of W Zᵀ, mirrored.
    for col in 0..9 {
        let zc = &z[col];
        for row in 0..=col {
            let wr = &w[row];
            let mut acc = T::zero();
            for kk in 0..9 {
                acc += wr[kk] * zc[kk];
            }
            let v = acc * vol;
            h[(3 + row, 3 + col)] = v;
            h[(3 + col, 3 + row)] = v;
        }
    }
    // Corner 0: H₀_b = −Σ_a H_ab over a = 1–3 (z₀ = −(z₁ + z₂ + z₃) in every mode), then
    // H₀₀ = −Σ_b H₀_b; the matrix stays symmetric by construction.
    for col in 3..12 {
        for i in 0..3 {
            let v = -(h[(3 + i, col)] + h[(6 + i, col)] + h[(9 + i, col)]);
            h[(i, col)] = v;
            h[(col, i)] = v;
        }
    }
    for j in 0..3 {
        for i in 0..=j {
            let v = -(h[(i, 3 + j)] + h[(i, 6 + j)] + h[(i, 9 + j)]);
            h[(i, j)] = v;
            h[(j, i)] = v;
        }
    }
    ElementState {
        energy: psi * vol,
        gradient: gradient_of(&p, g, vol),
        hessian: Some(h),
    }
}

/// V·Bᵀ(∂P/∂F)B for a 9×9 ∂P/∂F `d` (Pa) and the shape gradients `g` (1/m): the 12×12 element
/// Hessian (N/m) by contracting the column side, then the row side.
fn contract_dpdf<T: RealField + Copy>(
    d: &SMatrix<T, 9, 9>,
    g: &[Vector3<T>; 4],
    vol: T,
) -> SMatrix<T, 12, 12> {
    // H[(3a+i),(3b+k)] = V Σ_jl D[(i+3j),(k+3l)] g_a[j] g_b[l]
    let mut h = SMatrix::<T, 12, 12>::zeros();
    // First contract the column side: T[(i+3j), (3b+k)] = Σ_l D[(i+3j),(k+3l)] g_b[l].
    let mut t = SMatrix::<T, 9, 12>::zeros();
    for r in 0..9 {
        for b in 0..4 {
            for k in 0..3 {
                let mut acc = T::zero();
                for l in 0..3 {
                    acc += d[(r, k + 3 * l)] * g[b][l];
                }
                t[(r, 3 * b + k)] = acc;
            }
        }
    }
    for a in 0..4 {
        for i in 0..3 {
            for col in 0..12 {
                let mut acc = T::zero();
                for j in 0..3 {
                    acc += t[(i + 3 * j, col)] * g[a][j];
                }
                h[(3 * a + i, col)] = acc * vol;
            }
        }
    }
    h
}

/// The element Hessian (N/m) by the reference route: ∂P/∂F as a 9×9 matrix from nalgebra's
/// general SVD and symmetric eigen-solver ([`dpdf_reference`]), contracted twice with the shape
/// gradients. What [`element_hessian_filtered`] computed before its fast path (cyclic-Jacobi
/// SVD, one rank-one update per mode); kept as the oracle the fast path is tested against and
/// the baseline of the Newton bench's assembly phases.
pub fn element_hessian_reference<T: RealField + Copy>(
    m: &Material,
    rest: &ElementRest<T>,
    x: &[Vector3<T>; 4],
    filter: Option<EigenFilter>,
) -> SMatrix<T, 12, 12> {
    let f = rest.deformation_gradient(x);
    contract_dpdf(
        &dpdf_reference(m, &f, filter),
        &rest.shape_gradients(),
        rest.volume,
    )
}
