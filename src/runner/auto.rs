//! `--solver auto` (`[solver] name = "auto"`): the rule that picks a solver for a scene and the
//! backend it runs on, and says why.
//!
//! The rule reads only facts a reader can check in the banner or the scene file ([`Facts`]):
//! the backend, IPC contact, a static solve, hard strain limits and the vertex count. In order,
//! first match wins:
//!
//! 1. hard strain limits: `admm`, the only solver that enforces them;
//! 2. IPC contact: `newton` — every IPC-capable solver reaches Newton's answer, and Newton took
//!    the fewest seconds on contact_stack and tied with multilevel on contact_balls (6–7
//!    iterations per step against tens to hundreds for the L-BFGS family and JGS2/VBD; JGS2
//!    and VBD also run IPC on a device, not yet timed on a GPU);
//! 3. a static solve: `newton` — a handful of iterations per load increment, and the device
//!    iterations and ADMM have no inertia-free form;
//! 4. a GPU: `jgs2`, its whole iteration on the device (every obstacle kind included);
//! 5. the CPU: `qn` — at the default tolerance (CN 1e-5) its cheap iterations took the least
//!    time per step of the L-BFGS family and Newton on every dynamic CPU scene measured but one
//!    (DOT 1.08× faster on the first two, mild steps of twist_stretch_squash): the cantilever
//!    and twists from their start (`cargo bench --bench auto`), and on the large-deformation
//!    states of armadillo_18k, bunny_20k and the 16,640-vertex twisted bar, bundled and hard,
//!    0.4–0.7 of DOT's time per step and a fraction of Newton's (the book's *Solver
//!    comparisons*, cases `large_deformation`, `dot`, `dot_hard` of `cargo bench --bench
//!    solvers`). Multilevel was ahead on two scenes by up to 1.4× without its SMS precompute
//!    counted, and 4× behind on the hard twist; DOT was ahead where a step was asked for more
//!    digits (the bundled twist at CN 1e-7), which the rule does not read. An earlier run had
//!    DOT ahead on armadillo_114k's hard twist, before QN's first trial took the last pair's
//!    curvature (issue 43); it has not been repeated.
//!
//! Newton stays the pick for contact and static solves, where it was the fastest or the only
//! solver with a device or static form; for plain dynamics on the CPU the measurements favour
//! the L-BFGS family.
//!
//! `cargo bench --bench auto` runs every candidate on representative scenes and prints the
//! rule's pick next to the measured times (the book's *Solver auto* page).

use crate::gpu::Backend;
use crate::problem::Model;
use crate::scene::{RunConfig, SolverKind};

/// What the rule reads about a scene and its backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// Where the run steps: [`Backend::Cpu`] or [`Backend::Gpu`] (already resolved).
    pub backend: Backend,
    /// `[contact] ipc = true`.
    pub ipc: bool,
    /// `[simulation] static = true`.
    pub static_solve: bool,
    /// Some element has a hard strain limit (`material.strain_limit`).
    pub strain_limits: bool,
    /// Vertices of all objects together (the banner's count).
    pub vertices: usize,
}

impl Facts {
    /// The facts of `model` run as `config` on `backend`.
    pub fn of(model: &Model, config: &RunConfig, backend: Backend) -> Self {
        Facts {
            backend,
            ipc: model.contact.is_some(),
            static_solve: config.static_solve,
            strain_limits: !model.strain_limits.is_empty(),
            vertices: model.num_vertices(),
        }
    }
}

/// The rule's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    /// The solver.
    pub solver: SolverKind,
    /// Why, in one line.
    pub reason: String,
}

/// The solver `auto` picks for `f` (the rule of the module docs).
pub fn pick(f: &Facts) -> Pick {
    let pick = |solver, reason: String| Pick { solver, reason };
    if f.strain_limits {
        return pick(
            SolverKind::Admm,
            "hard strain limits: only admm enforces them".into(),
        );
    }
    if f.ipc {
        return pick(
            SolverKind::Newton,
            "IPC contact: newton is the fastest IPC solver on the contact scenes".into(),
        );
    }
    if f.static_solve {
        return pick(
            SolverKind::Newton,
            "static solve: newton converges in a few iterations per load increment".into(),
        );
    }
    match f.backend {
        Backend::Gpu => pick(
            SolverKind::Jgs2,
            "GPU backend: jgs2 runs its whole iteration on the device".into(),
        ),
        _ => pick(
            SolverKind::Qn,
            format!(
                "dynamic scene of {} vertices on the CPU: qn took the least time per step on \
                 such scenes",
                f.vertices
            ),
        ),
    }
}

/// With [`RunConfig::auto_solver`], `config.solver` set to the rule's pick for `model` on
/// `backend`, and the pick; otherwise `None` and `config` unchanged.
pub fn resolve(config: &mut RunConfig, model: &Model, backend: Backend) -> Option<Pick> {
    if !config.auto_solver {
        return None;
    }
    let p = pick(&Facts::of(model, config, backend));
    config.solver = p.solver;
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(backend: Backend, vertices: usize) -> Facts {
        Facts {
            backend,
            ipc: false,
            static_solve: false,
            strain_limits: false,
            vertices,
        }
    }

    #[test]
    fn each_rule_in_order() {
        let large = 100_000;
        let cases = [
            (
                Facts {
                    strain_limits: true,
                    ipc: true,
                    ..facts(Backend::Gpu, large)
                },
                SolverKind::Admm,
            ),
            (
                Facts {
                    ipc: true,
                    static_solve: true,
                    ..facts(Backend::Gpu, large)
                },
                SolverKind::Newton,
            ),
            (
                Facts {
                    static_solve: true,
                    ..facts(Backend::Cpu, large)
                },
                SolverKind::Newton,
            ),
            (facts(Backend::Gpu, 10), SolverKind::Jgs2),
            (facts(Backend::Gpu, large), SolverKind::Jgs2),
            (facts(Backend::Cpu, 10), SolverKind::Qn),
            (facts(Backend::Cpu, large), SolverKind::Qn),
        ];
        for (f, want) in cases {
            let p = pick(&f);
            assert_eq!(p.solver, want, "{f:?}: {}", p.reason);
            assert!(!p.reason.is_empty() && !p.reason.contains('\n'), "{f:?}");
        }
    }
}
