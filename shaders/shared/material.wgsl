// Isotropic hyperelastic models in singular-value space (f32). Each model's derivatives are
// written as those of Ψ(σ) = k(I_C) + h(J) + Σ_i g(σ_i),   I_C = Σσ_i², J = σ₀σ₁σ₂,
// which gives ∂Ψ/∂σ, ∂²Ψ/∂σ² and the closed-form eigenvalues of the 2×2 flip/twist blocks
// without dividing by σ_i − σ_j. Ψ itself is evaluated in e = σ − 1, rearranged so that no
// first-order terms cancel at rest (f32 energy differences stay meaningful near rest). The CPU twin (src/gpu/twins/material.rs) mirrors this file.
// Model ids match `jello::gpu::GpuModel`.

const MODEL_STABLE_NEO_HOOKEAN: u32 = 0u;
const MODEL_STABLE_NEO_HOOKEAN_VBD: u32 = 1u;
const MODEL_FIXED_COROTATED: u32 = 2u;
const MODEL_NEO_HOOKEAN: u32 = 3u;
const MODEL_STVK: u32 = 4u;
const MODEL_ARAP: u32 = 5u;
// Linear elasticity is not a σ-space model: the kernel evaluates Ψ and P from F directly and
// uses U = V = I with the σ-space data below (∂²Ψ/∂σ² = 2μI + λ11ᵀ, flip 2μ, twist 0), which
// reproduces its constant ∂P/∂F.
const MODEL_LINEAR: u32 = 6u;

// Per-element material record (16 bytes): Lamé-like parameters in Pa, rest volume in m³.
struct ElemParams {
    mu: f32,
    lambda: f32,
    volume: f32,
    model: u32,
}

struct SigmaEval {
    // Energy density Ψ (Pa = J/m³).
    psi: f32,
    // ∂Ψ/∂σ_i.
    grad: vec3<f32>,
    // ∂²Ψ/∂σ_i∂σ_j (symmetric).
    hess: mat3x3<f32>,
    // Eigenvalue of the symmetric ("flip") mode U(E_ij+E_ji)Vᵀ/√2 for pairs (0,1), (0,2), (1,2):
    // (ψ_i − ψ_j)/(σ_i − σ_j).
    flip: vec3<f32>,
    // Eigenvalue of the antisymmetric ("twist") mode U(E_ij−E_ji)Vᵀ/√2: (ψ_i + ψ_j)/(σ_i + σ_j).
    twist: vec3<f32>,
}

// Denominator guard for the σ_i + σ_j singularity of the corotational twist eigenvalue.
const PAIR_SUM_EPS: f32 = 1e-6;

fn guard_pair_sum(d: f32) -> f32 {
    if abs(d) < PAIR_SUM_EPS {
        if d < 0.0 {
            return -PAIR_SUM_EPS;
        }
        return PAIR_SUM_EPS;
    }
    return d;
}

fn f32_infinity() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

fn f32_nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

// x − ln(1 + x) for x > −1 without cancellation: a Taylor series for |x| < 0.1 (truncation
// < 1e-9 relative), else the direct formula (WGSL's log has absolute error ≤ 2⁻²¹ near 1, which
// the series avoids where it would matter).
fn x_minus_log1p(x: f32) -> f32 {
    if abs(x) < 0.1 {
        // x²/2 − x³/3 + x⁴/4 − x⁵/5 + x⁶/6 − x⁷/7 + x⁸/8 (Horner).
        let p = 1.0 / 6.0 + x * (-1.0 / 7.0 + x * (1.0 / 8.0));
        return x * x * (0.5 + x * (-1.0 / 3.0 + x * (0.25 + x * (-0.2 + x * p))));
    }
    return x - log(1.0 + x);
}

// ln(1 + x) for x > −1, accurate near 0 (see x_minus_log1p).
fn log1p_f32(x: f32) -> f32 {
    if abs(x) < 0.1 {
        return x - x_minus_log1p(x);
    }
    return log(1.0 + x);
}

fn sigma_eval(model: u32, mu: f32, lam: f32, s: vec3<f32>) -> SigmaEval {
    let ic = dot(s, s);
    let j = s.x * s.y * s.z;
    // Energies are evaluated in e = σ − 1 so that Ψ keeps f32 relative precision near rest:
    // I_C − 3, J − 1 and w = (I_C − 3)/2 − (J − 1) (second order at rest) without cancellation.
    let e1 = s - vec3<f32>(1.0);
    let se = e1.x + e1.y + e1.z;
    let pe = e1.x * e1.y + e1.x * e1.z + e1.y * e1.z;
    let te = e1.x * e1.y * e1.z;
    let d_ic = dot(e1, e1) + 2.0 * se;
    let d_j = se + pe + te;
    let w = 0.5 * dot(e1, e1) - pe - te;
    var psi = 0.0;
    // ∂J/∂σ_i.
    let pj = vec3<f32>(s.y * s.z, s.x * s.z, s.x * s.y);
    // Pair (0,1),(0,2),(1,2): first, second, and the remaining singular value.
    let si = vec3<f32>(s.x, s.x, s.y);
    let sj = vec3<f32>(s.y, s.z, s.z);
    let third = vec3<f32>(s.z, s.y, s.x);
    // First and second derivatives of k(I_C) (.y, .z) and of h(J); .x unused.
    var k = vec3<f32>(0.0);
    var h = vec3<f32>(0.0);
    // Separable part: g'(σ_i), g''(σ_i), and its flip/twist contributions per pair.
    var g1 = vec3<f32>(0.0);
    var g2 = vec3<f32>(0.0);
    var gflip = vec3<f32>(0.0);
    var gtwist = vec3<f32>(0.0);
    var infinite = false;
    switch model {
        case MODEL_STABLE_NEO_HOOKEAN: {
            // Smith et al. 2018: μ/2(I_C−3) − μ/2·ln((I_C+1)/4) + λ/2((J−α)² − (1−α)²),
            // α = 1 + 3μ/(4λ); constants chosen so Ψ(I) = 0. Rearranged with q = (I_C−3)/4:
            // Ψ = μ/2·(q − ln(1+q)) + 3μ/4·w + λ/2·(J−1)², each term second order at rest.
            let alpha = 1.0 + 0.75 * mu / lam;
            psi = 0.5 * mu * x_minus_log1p(0.25 * d_ic) + 0.75 * mu * w + 0.5 * lam * d_j * d_j;
            k = vec3<f32>(0.0, 0.5 * mu - 0.5 * mu / (ic + 1.0), 0.5 * mu / ((ic + 1.0) * (ic + 1.0)));
            h = vec3<f32>(0.0, lam * (j - alpha), lam);
        }
        case MODEL_STABLE_NEO_HOOKEAN_VBD: {
            // μ/2(I_C−3) + λ/2((J−α)² − (1−α)²), α = 1 + μ/λ (Ψ(I) = 0) = μ·w + λ/2·(J−1)².
            let alpha = 1.0 + mu / lam;
            psi = mu * w + 0.5 * lam * d_j * d_j;
            k = vec3<f32>(0.0, 0.5 * mu, 0.0);
            h = vec3<f32>(0.0, lam * (j - alpha), lam);
        }
        case MODEL_FIXED_COROTATED, MODEL_ARAP: {
            // μ·Σ(σ_i−1)² [+ λ/2(J−1)² for fixed corotated].
            psi = mu * dot(e1, e1);
            g1 = 2.0 * mu * e1;
            g2 = vec3<f32>(2.0 * mu);
            gflip = vec3<f32>(2.0 * mu);
            let sum = vec3<f32>(guard_pair_sum(si.x + sj.x), guard_pair_sum(si.y + sj.y), guard_pair_sum(si.z + sj.z));
            gtwist = 2.0 * mu * (vec3<f32>(1.0) - 2.0 / sum);
            if model == MODEL_FIXED_COROTATED {
                psi += 0.5 * lam * d_j * d_j;
                h = vec3<f32>(0.0, lam * d_j, lam);
            }
        }
        case MODEL_NEO_HOOKEAN: {
            // μ/2(I_C−3) − μ·ln J + λ/2(ln J)²; Ψ = +∞ and NaN derivatives for J ≤ 0.
            // Rearranged: μ·w + μ·((J−1) − ln J) + λ/2·(ln J)².
            k = vec3<f32>(0.0, 0.5 * mu, 0.0);
            if j > 0.0 {
                let lj = log1p_f32(d_j);
                psi = mu * w + mu * x_minus_log1p(d_j) + 0.5 * lam * lj * lj;
                h = vec3<f32>(0.0, (lam * lj - mu) / j, (mu + lam - lam * lj) / (j * j));
            } else {
                infinite = true;
            }
        }
        case MODEL_STVK: {
            // μ·tr(E²) + λ/2·tr(E)², E = (FᵀF − I)/2, E_i = e_i + e_i²/2.
            let e = e1 + 0.5 * e1 * e1;
            psi = mu * dot(e, e) + 0.125 * lam * d_ic * d_ic;
            g1 = 2.0 * mu * e * s;
            g2 = mu * (3.0 * s * s - vec3<f32>(1.0));
            gflip = mu * (si * si + si * sj + sj * sj - vec3<f32>(1.0));
            gtwist = mu * (si * si - si * sj + sj * sj - vec3<f32>(1.0));
            k = vec3<f32>(0.0, 0.25 * lam * d_ic, 0.25 * lam);
        }
        case MODEL_LINEAR: {
            // Only the ∂P/∂F data (see MODEL_LINEAR); Ψ and P come from F in the kernel.
            var r: SigmaEval;
            r.psi = 0.0;
            r.grad = vec3<f32>(0.0);
            r.hess = mat3x3<f32>(vec3<f32>(2.0 * mu + lam, lam, lam), vec3<f32>(lam, 2.0 * mu + lam, lam), vec3<f32>(lam, lam, 2.0 * mu + lam));
            r.flip = vec3<f32>(2.0 * mu);
            r.twist = vec3<f32>(0.0);
            return r;
        }
        default: {
            infinite = true;
        }
    }
    var r: SigmaEval;
    r.psi = psi;
    r.grad = 2.0 * k.y * s + h.y * pj + g1;
    let off = mat3x3<f32>(vec3<f32>(0.0, s.z, s.y), vec3<f32>(s.z, 0.0, s.x), vec3<f32>(s.y, s.x, 0.0));
    let diag = mat3x3<f32>(vec3<f32>(g2.x, 0.0, 0.0), vec3<f32>(0.0, g2.y, 0.0), vec3<f32>(0.0, 0.0, g2.z));
    let ident = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    r.hess = outer3(s, s) * (4.0 * k.z) + ident * (2.0 * k.y) + outer3(pj, pj) * h.z + off * h.y + diag;
    r.flip = vec3<f32>(2.0 * k.y) - h.y * third + gflip;
    r.twist = vec3<f32>(2.0 * k.y) + h.y * third + gtwist;
    if infinite {
        let nan = f32_nan();
        r.psi = f32_infinity();
        r.grad = vec3<f32>(nan);
        r.hess = ident * nan;
        r.flip = vec3<f32>(nan);
        r.twist = vec3<f32>(nan);
    }
    return r;
}

// a·bᵀ.
fn outer3(a: vec3<f32>, b: vec3<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(a * b.x, a * b.y, a * b.z);
}
