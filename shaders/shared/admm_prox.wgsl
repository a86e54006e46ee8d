// ADMM-PD z-steps (proximal operators) on one element, f32 — the device mirror of
// src/solver/admm/prox.rs; the CPU twin is src/gpu/twins/admm.rs. F-form matrices
// (F = Σ x_a ∇N_aᵀ); w2 = w_e² (J), V the rest volume (m³), τ = w²/V (Pa).
#import linalg
#import material

// Newton iterations of the σ-prox at most (f64: 50; 3–6 are typical).
const ADMM_NEWTON_MAX: u32 = 30u;
// Step halvings of its line search at most (2⁻³⁰ is below f32 resolution).
const ADMM_HALVINGS: u32 = 30u;
// Stop when ‖∇φ‖ ≤ ADMM_TOL·τ·(1 + ‖σ̃‖): ~30× the f32 round-off of ∇φ's τ(σ − σ̃) term.
const ADMM_TOL: f32 = 2e-6;
// φ's f32 evaluation noise, relative (the full Newton step may raise φ by this much when it
// halves ‖∇φ‖; f64: 1e-10).
const ADMM_NOISE: f32 = 1e-5;
// Below this magnitude a value counts as finite.
const ADMM_FINITE: f32 = 3.0e38;

fn admm_is_finite(v: f32) -> bool {
    return abs(v) <= ADMM_FINITE;
}

fn admm_phi(p: ElemParams, s: vec3<f32>, sig: vec3<f32>, tau: f32) -> f32 {
    let d = s - sig;
    return sigma_eval(p.model, p.mu, p.lambda, s).psi + 0.5 * tau * dot(d, d);
}

fn admm_phi_grad(p: ElemParams, s: vec3<f32>, sig: vec3<f32>, tau: f32) -> vec3<f32> {
    return sigma_eval(p.model, p.mu, p.lambda, s).grad + tau * (s - sig);
}

// min_σ ψ̂(σ) + τ/2‖σ − σ̃‖² by damped Newton: the best of |σ̃|, σ̃, (1,1,1) as start, the
// Hessian's eigenvalues clamped at 1e-6·τ, Armijo backtracking (or the full step when it halves
// ‖∇φ‖ with φ unchanged to within its noise).
fn admm_prox_sigma(p: ElemParams, sig: vec3<f32>, tau: f32) -> vec3<f32> {
    var s = sig;
    var f = f32_infinity();
    var starts = array<vec3<f32>, 3>(abs(sig), sig, vec3<f32>(1.0));
    for (var i = 0u; i < 3u; i++) {
        let fc = admm_phi(p, starts[i], sig, tau);
        if fc < f {
            s = starts[i];
            f = fc;
        }
    }
    let tol = ADMM_TOL * tau * (1.0 + length(sig));
    let noise = ADMM_NOISE * (abs(f) + tau * (1.0 + dot(sig, sig)));
    for (var it = 0u; it < ADMM_NEWTON_MAX; it++) {
        let ev = sigma_eval(p.model, p.mu, p.lambda, s);
        let g = ev.grad + tau * (s - sig);
        let gn = length(g);
        // NaN stops as well.
        if !(gn > tol) {
            break;
        }
        let eig = sym_eig3(ev.hess + mat3x3<f32>(vec3<f32>(tau, 0.0, 0.0), vec3<f32>(0.0, tau, 0.0), vec3<f32>(0.0, 0.0, tau)));
        let fl = 1e-6 * tau;
        var l = eig.values;
        l = vec3<f32>(select(fl, l.x, l.x > fl), select(fl, l.y, l.y > fl), select(fl, l.z, l.z > fl));
        let q = eig.vectors;
        let step = -(q * ((transpose(q) * g) / l));
        let slope = dot(g, step);
        var alpha = 1.0;
        var accepted = false;
        for (var k = 0u; k < ADMM_HALVINGS; k++) {
            let trial = s + alpha * step;
            let ft = admm_phi(p, trial, sig, tau);
            let armijo = ft <= f + 1e-4 * alpha * slope;
            var newton = false;
            if alpha == 1.0 && ft <= f + noise {
                newton = length(admm_phi_grad(p, trial, sig, tau)) <= 0.5 * gn;
            }
            if admm_is_finite(ft) && (armijo || newton) {
                s = trial;
                f = ft;
                accepted = true;
                break;
            }
            alpha *= 0.5;
        }
        if !accepted {
            break;
        }
    }
    return s;
}

fn admm_diag(s: vec3<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(vec3<f32>(s.x, 0.0, 0.0), vec3<f32>(0.0, s.y, 0.0), vec3<f32>(0.0, 0.0, s.z));
}

fn admm_identity() -> mat3x3<f32> {
    return admm_diag(vec3<f32>(1.0));
}

// The hyperelastic z-step argmin_F V Ψ(F) + w²/2‖F − v‖². Linear elasticity in closed form:
// (C + τI)(F − I) = τ(v − I) splits into skew(F − I) = skew(v − I) and the symmetric part
// S = (τ sym(v − I) − λ tr S·I)/(2μ + τ), tr S = τ tr(v − I)/(2μ + τ + 3λ).
fn admm_prox_hyperelastic(p: ElemParams, v: mat3x3<f32>, w2: f32) -> mat3x3<f32> {
    let tau = w2 / p.volume;
    if p.model == MODEL_LINEAR {
        let b = v - admm_identity();
        let bt = transpose(b);
        let skew = (b - bt) * 0.5;
        let sym = (b + bt) * 0.5;
        let tr = b[0][0] + b[1][1] + b[2][2];
        let trs = tau * tr / (2.0 * p.mu + tau + 3.0 * p.lambda);
        let s = (sym * tau - admm_diag(vec3<f32>(p.lambda * trs))) * (1.0 / (2.0 * p.mu + tau));
        return admm_identity() + s + skew;
    }
    let sv = svd3(v);
    let sigma = admm_prox_sigma(p, sv.s, tau);
    return sv.u * admm_diag(sigma) * transpose(sv.v);
}

// The PD z-step z = (k·proj(v) + w²v)/(k + w²), k = 2μV: proj the rotation of the signed SVD
// (ARAP, fixed corotated with λ = 0) or I + skew(v) (linear with λ = 0); the host refuses other
// materials.
fn admm_prox_pd(p: ElemParams, v: mat3x3<f32>, w2: f32) -> mat3x3<f32> {
    let k = 2.0 * p.mu * p.volume;
    var proj: mat3x3<f32>;
    if p.model == MODEL_LINEAR {
        proj = admm_identity() + (v - transpose(v)) * 0.5;
    } else {
        let sv = svd3(v);
        proj = sv.u * transpose(sv.v);
    }
    return (proj * k + v * w2) * (1.0 / (k + w2));
}
