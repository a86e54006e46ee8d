//! The vector–Jacobian product of one implicit step (implicit Euler or BDF2).
//!
//! The step solves r(y) = ∇_f E(y) = M(y − x̃)/ĥ² + ∇Ψ(y; μ, λ) + ∇B(y; m) = 0 on the free DOFs
//! f, with the pinned DOFs P of y at their targets p, x̃ = x̂ + ĥ v̂ + ĥ²(g + M⁻¹f_ext) and
//! v' = (y − x̂)/ĥ on every DOF. With ȳ = dL/dy + dL/dv'/ĥ (the adjoint of the new positions
//! through both outputs), the implicit function theorem gives, for any input q,
//! dL/dq = −λᵀ ∂r/∂q with H_ff λ = ȳ_f (H the exact Hessian at y): see the terms below.

use super::contact::{
    add_products, stiffness_term, surface_mass_terms, ContactBlocks, StepContact,
};
use super::hessian::{pinned_coupling, vertex_barrier_mass_derivative, ExactHessian};
use super::params::stress_parameter_derivatives;
use crate::error::Result;
use crate::problem::potential::corners;
use crate::problem::{Model, State, StepProblem, StepScheme};
use nalgebra::Vector3;
use rayon::prelude::*;

/// Which per-step products the backward pass needs.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Wanted {
    pub material: bool,
    pub mass: bool,
    pub pins: bool,
    pub forces: bool,
    pub stiffness: bool,
}

/// What one step sends back: the adjoints of x̂ and v̂ (3n each; the caller maps them onto the
/// states they combine), and the step's parameter terms.
pub(super) struct StepAdjoint {
    pub x_hat: Vec<f64>,
    pub v_hat: Vec<f64>,
    /// Whether x̂, v̂ are BDF2's combinations of two states (else the start state's own).
    pub bdf2: bool,
    /// dL/df of this step's external forces (λ on free DOFs), when wanted.
    pub forces: Option<Vec<f64>>,
    /// dL/dp of the pinned targets at the step's end (3n, zero off the pins), when wanted.
    pub pins: Option<Vec<f64>>,
    /// dL/dκ of the IPC stiffness through this step, [L]·m⁴/J (0 when not wanted).
    pub stiffness: f64,
}

/// The inputs of one step's VJP.
pub(super) struct StepInputs<'a> {
    pub model: &'a Model,
    pub h: f64,
    /// 1-based number of the step (for messages).
    pub number: usize,
    pub start: &'a State,
    pub end: &'a State,
    /// The contact terms the step was solved with (held fixed).
    pub contact: &'a StepContact,
    /// dL/dy and dL/dv' (3n each), total.
    pub ax: &'a [f64],
    pub av: &'a [f64],
}

/// Runs one step's VJP; adds μ, λ (per tet) and mass (per vertex) terms into `mu`, `lambda`,
/// `mass` where wanted.
pub(super) fn step_adjoint(
    inp: &StepInputs,
    hessian: &mut ExactHessian,
    want: Wanted,
    mu: &mut [f64],
    lambda_param: &mut [f64],
    mass: &mut [f64],
) -> Result<StepAdjoint> {
    let model = inp.model;
    let n = inp.start.x.len();
    let scheme = StepScheme::new(model, inp.start, inp.h);
    let hh = scheme.h_hat;
    let w = scheme.inertia();
    let y = &inp.end.x;
    // ȳ = dL/dy + dL/dv'/ĥ; x̂ gets −dL/dv'/ĥ directly.
    let mut ybar: Vec<f64> = (0..n).map(|k| inp.ax[k] + inp.av[k] / hh).collect();
    let mut x_hat: Vec<f64> = inp.av.iter().map(|a| -a / hh).collect();
    let mut lam: Vec<f64> = ybar
        .iter()
        .enumerate()
        .map(|(k, &g)| if model.pinned[k / 3] { 0.0 } else { g })
        .collect();
    let any = lam.iter().any(|&l| l != 0.0);
    let touches = model.contact.is_some() || model.obstacles.iter().any(|o| o.is_bounded());
    // The step's problem: its x̂, pinned DOFs and (moving) obstacle positions for the contact
    // terms, and the weights the Hessian uses.
    let problem = StepProblem::new(model, inp.start, inp.h);
    let blocks = if any && touches {
        ContactBlocks::at(&problem, y, inp.contact)
    } else {
        ContactBlocks::none()
    };
    if any {
        hessian.factor_at(&problem, y, &blocks, inp.number)?;
        hessian.solve(&mut lam)?;
    }
    // x̃ = x̂ + ĥ v̂ + …: ∂r/∂x̃ = −M/ĥ², so x̃̄ = M λ/ĥ² (free DOFs; λ_P = 0).
    let mut v_hat = vec![0.0; n];
    for k in 0..n {
        let xt = model.mass[k / 3] * w * lam[k];
        x_hat[k] += xt;
        v_hat[k] = hh * xt;
    }
    // Friction's displacement is y − x̂: ∂r/∂x̂ = −∇²D, so x̂̄ += ∇²D λ.
    add_products(blocks.friction.iter(), n / 3, &lam, &mut x_hat, |_| true);
    let pins = want.pins.then(|| {
        // y_P = p directly, and through the elastic coupling r_f(y_f, y_P): −(H_Pf λ).
        let mut out = vec![0.0; n];
        if any {
            pinned_coupling(model, y, &blocks, &lam, &mut out);
        }
        for k in 0..n {
            out[k] = if model.pinned[k / 3] {
                ybar[k] - out[k]
            } else {
                0.0
            };
        }
        out
    });
    if !any {
        return Ok(StepAdjoint {
            x_hat,
            v_hat,
            bdf2: scheme.bdf2,
            forces: want.forces.then(|| vec![0.0; n]),
            pins,
            stiffness: 0.0,
        });
    }
    if want.material {
        material_terms(model, y, &lam, mu, lambda_param);
    }
    if want.mass {
        mass_terms(model, inp, &scheme, &lam, mass);
        if touches {
            surface_mass_terms(&problem, y, &lam, mass);
        }
    }
    let stiffness = if want.stiffness {
        stiffness_term(&problem, y, &lam)
    } else {
        0.0
    };
    ybar.clear();
    Ok(StepAdjoint {
        x_hat,
        v_hat,
        bdf2: scheme.bdf2,
        forces: want.forces.then_some(lam),
        pins,
        stiffness,
    })
}

/// −λ_eᵀ ∂(∇Ψ_e)/∂(μ_e, λ_e) = −V (P_μ, P_λ) : δF(λ_e) per tet.
fn material_terms(model: &Model, y: &[f64], lam: &[f64], mu: &mut [f64], la: &mut [f64]) {
    let terms: Vec<(f64, f64)> = (0..model.mesh.num_tets())
        .into_par_iter()
        .map(|t| {
            let tet = &model.mesh.tets[t];
            let rest = &model.rest[t];
            let df = rest.deformation_gradient(&corners(lam, tet));
            if df == nalgebra::Matrix3::zeros() {
                return (0.0, 0.0);
            }
            let f = rest.deformation_gradient(&corners(y, tet));
            let (pm, pl) = stress_parameter_derivatives(&model.materials[t], &f);
            (-rest.volume * pm.dot(&df), -rest.volume * pl.dot(&df))
        })
        .collect();
    for (t, (a, b)) in terms.into_iter().enumerate() {
        mu[t] += a;
        la[t] += b;
    }
}

/// −λᵀ ∂r/∂m_u per vertex u: the inertia term m_u(y_u − x̃⁰_u)/ĥ² (x̃⁰ without forces), the
/// model's windowed forces (each total F split by mass, −m_v F/M over its vertices), and the
/// obstacle barrier's weight κ m_u/h². This step's extra per-vertex forces do not depend on
/// mass (m_v ĥ⁻² · ĥ² f_v/m_v = f_v).
fn mass_terms(model: &Model, inp: &StepInputs, scheme: &StepScheme, lam: &[f64], out: &mut [f64]) {
    let y = &inp.end.x;
    let (hh, w, g) = (scheme.h_hat, scheme.inertia(), model.gravity);
    for u in 0..model.num_vertices() {
        if model.pinned[u] {
            continue;
        }
        let mut d = Vector3::zeros();
        for k in 0..3 {
            let i = 3 * u + k;
            let x0 = scheme.x_hat[i] + hh * scheme.v_hat[i] + hh * hh * g[k];
            d[k] = w * (y[i] - x0);
        }
        if !model.obstacles.is_empty() {
            let p = Vector3::from_column_slice(&y[3 * u..3 * u + 3]);
            d += vertex_barrier_mass_derivative(model, inp.h, &p);
        }
        out[u] -= d.dot(&Vector3::from_column_slice(&lam[3 * u..3 * u + 3]));
    }
    for f in model.forces.iter().filter(|f| f.active(inp.start.t)) {
        let total: f64 = f.vertices.iter().map(|&v| model.mass[v as usize]).sum();
        if total <= 0.0 {
            continue;
        }
        let force = Vector3::from(f.force);
        let lam_at = |v: u32| Vector3::from_column_slice(&lam[3 * v as usize..3 * v as usize + 3]);
        // r_v ∋ −m_v F/M: ∂/∂m_u = −F(δ_uv/M − m_v/M²).
        let weighted: f64 = f
            .vertices
            .iter()
            .map(|&v| model.mass[v as usize] * lam_at(v).dot(&force))
            .sum::<f64>()
            / (total * total);
        for &u in &f.vertices {
            out[u as usize] += lam_at(u).dot(&force) / total - weighted;
        }
    }
}
