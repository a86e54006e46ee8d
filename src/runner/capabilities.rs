//! Which solver runs what, on which backend, and why: the one table [`setup_on`] follows and
//! the CLI prints (`jello info`).
//!
//! Two kinds of limits:
//! - [`refusal`]: scenes a solver cannot run on any backend (it would silently ignore part of
//!   the model or an option): hard strain limits outside ADMM, IPC contact outside Newton,
//!   multilevel and the L-BFGS family ([`takes_ipc`]), an `eigen_filter` a solver has no
//!   Hessian for, ADMM static solves.
//! - [`device_blocker`]: scenes a solver's device path cannot run; `--backend gpu` makes them
//!   an error, `auto` falls back to the f64 CPU path saying why.
//!
//! [`setup_on`]: super::setup_on

use crate::gpu::Backend;
use crate::problem::Model;
use crate::scene::{RunConfig, SolverKind};
use crate::solver::jgs2::ContactCoupling;
use crate::solver::HessianFilter;

/// What runs on the device for `kind` with a GPU backend (f32 kernels), and what stays f64 on
/// the host.
pub fn device_path(kind: SolverKind) -> &'static str {
    match kind {
        SolverKind::Newton => {
            "gradients and element Hessians on the device; Cholesky and line-search energies \
             f64 on the host"
        }
        SolverKind::Jgs2 | SolverKind::Vbd => {
            "the whole iteration on the device (obstacles and IPC contact included; the IPC \
             candidates from the device broad phase, read back with their gather lists built on \
             the host at each step's start and list rebuild); forbid's strict retries on the f64 \
             reference"
        }
        SolverKind::Qn | SolverKind::Dot | SolverKind::LbfgsH => {
            "local steps and residuals on the device; the prefactored solve f64 on the host; \
             dynamic scenes with half-space obstacles at most (IPC contact: CPU)"
        }
        SolverKind::Admm => {
            "local steps and residuals on the device; the prefactored x-step f64 on the host; \
             no obstacles or strain limits"
        }
        SolverKind::Multilevel => {
            "with --backend gpu only (auto keeps f64): the Newton direction (level PCGs, \
             smoother) and line-search energies on the device; gradients and Hessian terms f64"
        }
    }
}

/// The solvers that take `[solver] eigen_filter`: those that build an element Hessian. DOT and
/// LBFGS-H build theirs once per step, so they take clamp or abs, not the per-iteration
/// adaptive rule.
pub fn takes_eigen_filter(kind: SolverKind) -> bool {
    matches!(
        kind,
        SolverKind::Newton | SolverKind::Dot | SolverKind::LbfgsH
    )
}

/// The solvers that run scenes with `[contact] ipc = true`: those that minimise the step's
/// potential — the IPC barrier with its κ and lagged friction included — under the CCD step
/// filter (Newton, multilevel, and the L-BFGS loop of qn, dot and lbfgs-h, by a line search;
/// JGS2 and VBD with the barrier in each vertex's local system and per-vertex CCD; qn, dot and
/// lbfgs-h on the f64 CPU backend only).
pub fn takes_ipc(kind: SolverKind) -> bool {
    matches!(
        kind,
        SolverKind::Newton
            | SolverKind::Multilevel
            | SolverKind::Qn
            | SolverKind::Dot
            | SolverKind::LbfgsH
            | SolverKind::Jgs2
            | SolverKind::Vbd
    )
}

/// Why `kind` refuses an IPC scene (one line naming the key and the solvers that take it).
fn ipc_refusal(kind: SolverKind) -> String {
    let takers: Vec<&str> = SolverKind::ALL
        .iter()
        .filter(|k| takes_ipc(**k))
        .map(|k| k.name())
        .collect();
    // ADMM's contact is a different model — hard nodal constraints n·x_v ≥ t against convex
    // obstacles in its global step —, and an IPC pair couples up to four vertices of two
    // bodies through a non-convex distance, which neither its Uzawa working set nor its
    // per-vertex PGS projection holds.
    let why = match kind {
        SolverKind::Admm => {
            " (its contact is nodal constraints against obstacles, not a barrier between \
             surface pairs)"
        }
        _ => "",
    };
    format!(
        "contact.ipc: IPC contact between objects runs on solvers {}, not {kind}{why}",
        takers.join(", ")
    )
}

/// Why `config.solver` cannot run `model` on any backend, if it cannot: one line naming the
/// key. The scene's own keys are checked where it is built; these also catch a `--solver`
/// override (or a [`RunConfig`] changed in code) picking a solver the scene does not suit.
pub fn refusal(config: &RunConfig, model: &Model) -> Option<String> {
    let kind = config.solver;
    // Hard strain limits are a constraint only ADMM's z-step enforces.
    if !model.strain_limits.is_empty() && kind != SolverKind::Admm {
        return Some(format!(
            "material.strain_limit: hard strain limits are enforced only by solver admm, not \
             {kind}"
        ));
    }
    if model.contact.is_some() && !takes_ipc(kind) {
        return Some(ipc_refusal(kind));
    }
    if config.eigen_filter.is_some() && !takes_eigen_filter(kind) {
        let takers: Vec<&str> = SolverKind::ALL
            .iter()
            .filter(|k| takes_eigen_filter(**k))
            .map(|k| k.name())
            .collect();
        return Some(format!(
            "solver.eigen_filter: applies only to solver {}, not {kind}",
            takers.join(", ")
        ));
    }
    if config.eigen_filter == Some(HessianFilter::Adaptive) && kind != SolverKind::Newton {
        return Some(format!(
            "solver.eigen_filter: adaptive applies only to solver newton ({kind} builds its \
             Hessian once per step, so it takes clamp or abs)"
        ));
    }
    // The coarse correction's operator is one dense matrix of 12 unknowns per body at least.
    if kind == SolverKind::Jgs2
        && config.contact_coupling == ContactCoupling::Coarse
        && 12 * model.bodies.len() > crate::solver::jgs2::MAX_COARSE_UNKNOWNS
    {
        return Some(format!(
            "solver.contact_coupling: \"coarse\" takes at most {} objects (one dense coarse \
             matrix of 12 unknowns each); this scene has {}",
            crate::solver::jgs2::MAX_COARSE_UNKNOWNS / 12,
            model.bodies.len()
        ));
    }
    // ADMM's splitting needs the inertia term.
    if config.static_solve && kind == SolverKind::Admm {
        return Some(
            "solver admm does not handle static solves yet (its splitting needs the inertia \
             term): use qn or newton"
                .into(),
        );
    }
    None
}

/// Why `config.solver`'s device path cannot run `model` when `requested` asked for a GPU, if
/// it cannot (see [`device_path`]).
pub fn device_blocker(config: &RunConfig, model: &Model, requested: Backend) -> Option<String> {
    let kind = config.solver;
    match kind {
        SolverKind::Newton => None,
        // The device iterations have no static (inertia-free) form.
        SolverKind::Jgs2
        | SolverKind::Vbd
        | SolverKind::Qn
        | SolverKind::Dot
        | SolverKind::LbfgsH
            if config.static_solve =>
        {
            Some(format!(
                "a static solve with {kind} runs on the CPU backend"
            ))
        }
        // The device keeps a contacting vertex's partners held (its IPC kernels have no
        // coupled system).
        SolverKind::Jgs2
            if model.contact.is_some() && config.contact_coupling != ContactCoupling::Held =>
        {
            Some(format!(
                "jgs2 with contact_coupling = \"{}\" runs on the CPU backend (the device \
                 keeps the partners held)",
                match config.contact_coupling {
                    ContactCoupling::Coarse => "coarse",
                    _ => "extended",
                }
            ))
        }
        SolverKind::Jgs2 | SolverKind::Vbd => None,
        // IPC's surface pairs, additive CCD and κ updates are f64 host work.
        SolverKind::Qn | SolverKind::Dot | SolverKind::LbfgsH if model.contact.is_some() => {
            Some(format!(
                "{kind} with IPC contact (contact.ipc) runs on the CPU backend (surface pairs, \
                 CCD and κ updates are f64 host work)"
            ))
        }
        // Spheres and boxes act through surface primitive pairs, not on the device yet.
        SolverKind::Qn | SolverKind::Dot | SolverKind::LbfgsH => {
            model.obstacles.iter().any(|o| o.is_bounded()).then(|| {
                format!(
                    "{kind} on the device handles half-space obstacles only (spheres and boxes \
                     act through surface primitive pairs, not on the device yet)"
                )
            })
        }
        // The limited prox and its KKT forces, and contact (the QP on the factor, the KKT
        // residual), are f64 CPU work only.
        SolverKind::Admm if !model.obstacles.is_empty() => {
            Some("admm with obstacles (obstacles[0]: contact) runs on the CPU backend".into())
        }
        SolverKind::Admm if !model.strain_limits.is_empty() => Some(
            "admm with hard strain limits (material.strain_limit) runs on the CPU backend".into(),
        ),
        SolverKind::Admm => None,
        // Opt-in: the device path uploads H every iteration, solves the SMS coarse correction
        // on the host and has not been profiled on a hardware GPU, so `auto` keeps f64.
        SolverKind::Multilevel if requested != Backend::Gpu => {
            Some("multilevel runs its direction on the GPU only with --backend gpu".into())
        }
        SolverKind::Multilevel => None,
    }
}

/// One line per solver: its name and [`device_path`] (what `jello info` prints).
pub fn describe() -> String {
    SolverKind::ALL
        .iter()
        .map(|&k| format!("  {:<10} {}", k.name(), device_path(k)))
        .collect::<Vec<_>>()
        .join("\n")
}
