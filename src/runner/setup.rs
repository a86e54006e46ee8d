//! Building the simulation a scene asks for on the chosen backend: solver, device, subspace.

use super::auto::{self, Pick};
use super::capabilities;
use crate::error::{JelloError, Result};
use crate::gpu::{Backend, BackendChoice, Device};
use crate::material::EigenFilter;
use crate::problem::{DeviceElastic, ElasticTerms, Model};
use crate::scene::{BuiltScene, RunConfig, SolverKind};
use crate::sim::{SimOptions, Simulation};
use crate::solver::admm::{AdmmParams, AdmmSolver, PenaltyParams};
use crate::solver::backend::{CpuBackend, DeviceBackend, PotentialBackend};
use crate::solver::dot::{load_or_build_decomposition, DecompositionOrigin, DotParams, DotSolver};
use crate::solver::jgs2::{
    load_or_build, DeviceJgs2, Jgs2Params, Jgs2Solver, Jgs2Subspace, Safeguard, SubspaceOptions,
    SubspaceOrigin, Variant,
};
use crate::solver::multilevel::{
    build_solver as build_multilevel, MultilevelParams, MultilevelSolver, MultilevelStop,
    Preconditioner,
};
use crate::solver::pd::GlobalOptions;
use crate::solver::qn::{QnParams, QnSolver};
use crate::solver::{HessianFilter, NewtonParams, NewtonSolver, StepSolver, StopRule};
use std::path::Path;
use std::sync::Arc;

/// Builds the solver named in `config` for `model` on the f64 CPU path (`auto` resolved for the
/// CPU: [`auto::resolve`]; a static solve's stop rule tied to its load: [`static_config`]).
pub fn make_solver(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
) -> Result<Box<dyn StepSolver>> {
    let mut config = static_config(config, model);
    auto::resolve(&mut config, model, Backend::Cpu);
    build_solver(&config, model, cache_dir, None)
}

/// [`make_solver`] for a `config` already through [`static_config`], reusing a JGS2 subspace
/// already built for this model and h.
fn build_solver(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
    subspace: Option<Arc<Jgs2Subspace>>,
) -> Result<Box<dyn StepSolver>> {
    refuse(config, model)?;
    match config.solver {
        SolverKind::Newton => {
            let params = NewtonParams {
                stop: config.stop,
                max_iterations: config.max_iterations.unwrap_or(100),
                filter: config.eigen_filter.unwrap_or_default(),
                ..NewtonParams::default()
            };
            Ok(Box::new(NewtonSolver::new(model, params)?))
        }
        SolverKind::Vbd => Ok(Box::new(Jgs2Solver::vbd(model, jgs2_params(config)))),
        SolverKind::Jgs2 => {
            let subspace = match subspace {
                Some(s) => s,
                None => load_or_build_subspace(model, config.h, &config.subspace, cache_dir)?,
            };
            Ok(Box::new(
                Jgs2Solver::jgs2(model, jgs2_params(config), subspace)?
                    .with_contact_coupling(config.contact_coupling),
            ))
        }
        SolverKind::Qn | SolverKind::Dot | SolverKind::LbfgsH => lbfgs_solver(
            config,
            model,
            CpuBackend::new(model.num_vertices()),
            cache_dir,
        ),
        SolverKind::Multilevel => {
            let mut solver = multilevel_solver(config, model, cache_dir)?;
            if config.multilevel.smoother == Preconditioner::Jgs2 {
                // The same subspace (and cache) as `--solver jgs2`.
                let subspace = match subspace {
                    Some(s) => s,
                    None => load_or_build_subspace(model, config.h, &config.subspace, cache_dir)?,
                };
                solver.set_jgs2_subspace(model, subspace)?;
            }
            Ok(Box::new(solver))
        }
        SolverKind::Admm => Ok(Box::new(AdmmSolver::new(model, admm_params(config))?)),
    }
}

/// The multilevel solver of `config` (its SMS basis from `cache_dir` when valid), its
/// warnings on stderr.
fn multilevel_solver(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
) -> Result<MultilevelSolver> {
    let (solver, warnings) = build_multilevel(model, multilevel_params(config), cache_dir)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(solver)
}

/// [`capabilities::refusal`] as an error.
fn refuse(config: &RunConfig, model: &Model) -> Result<()> {
    match capabilities::refusal(config, model) {
        Some(why) => Err(JelloError::Invalid(why)),
        None => Ok(()),
    }
}

/// QN parameters of `config`: history, mode, stop rule and cap (default 1000: QN converges
/// linearly).
fn qn_params(config: &RunConfig) -> QnParams {
    QnParams {
        history: config.qn_history,
        mode: config.qn_mode,
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        ..QnParams::default()
    }
}

/// DOT / LBFGS-H parameters of `config`: subdomains (1 for lbfgs-h; default the thread count
/// for dot), history, mode, stop rule and cap (default 1000).
pub fn dot_params(config: &RunConfig) -> DotParams {
    let subdomains = match config.solver {
        SolverKind::LbfgsH => 1,
        _ => config
            .subdomains
            .unwrap_or_else(|| DotParams::default().subdomains),
    };
    DotParams {
        subdomains,
        history: config.qn_history,
        mode: config.qn_mode,
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        filter: match config.eigen_filter {
            Some(HessianFilter::Abs) => EigenFilter::Abs,
            _ => EigenFilter::Clamp,
        },
        ..DotParams::default()
    }
}

/// The L-BFGS family (`qn`, `dot`, `lbfgs-h`) on `backend`; DOT's partition comes from
/// `cache_dir` when a valid one is there (built and written otherwise).
fn lbfgs_solver<B: PotentialBackend + 'static>(
    config: &RunConfig,
    model: &Model,
    backend: B,
    cache_dir: Option<&Path>,
) -> Result<Box<dyn StepSolver>> {
    if config.solver == SolverKind::Qn {
        return Ok(Box::new(QnSolver::new(model, backend, qn_params(config))?));
    }
    let params = dot_params(config);
    let decomposition = load_partition(model, params.subdomains, cache_dir)?;
    Ok(Box::new(DotSolver::with_decomposition(
        model,
        backend,
        params,
        decomposition,
        config.solver.name(),
    )?))
}

/// DOT's partition of `model` into `subdomains` (cached in `cache_dir`), with one line on
/// stderr saying what it is and where it came from.
pub fn load_partition(
    model: &Model,
    subdomains: usize,
    cache_dir: Option<&Path>,
) -> Result<Arc<jello_precompute::partition::Decomposition>> {
    let t0 = crate::clock::Instant::now();
    let (d, origin, warnings) = load_or_build_decomposition(model, subdomains, cache_dir)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let st = d.stats();
    eprintln!(
        "dot partition: {} subdomains, {}–{} elements and {}–{} vertices each, {} interface \
         vertices ({:.3}× duplication), {:.0} ms{}",
        st.subdomains,
        st.elements_min,
        st.elements_max,
        st.vertices_min,
        st.vertices_max,
        st.interface_vertices,
        st.duplication,
        t0.elapsed().as_secs_f64() * 1e3,
        match origin {
            DecompositionOrigin::Cache(p) => format!(", read from {}", p.display()),
            DecompositionOrigin::Built(Some(p)) => format!(", cached at {}", p.display()),
            DecompositionOrigin::Built(None) => String::new(),
        }
    );
    Ok(d)
}

/// ADMM parameters of `config`: prox, weight scale, mode, stop rule, cap (default 1000) and
/// contact options.
fn admm_params(config: &RunConfig) -> AdmmParams {
    AdmmParams {
        prox: config.admm_prox,
        mode: config.qn_mode,
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        global: GlobalOptions {
            weight_scale: config.admm_weight_scale,
            ..GlobalOptions::default()
        },
        contact: config.admm_contact,
        anderson: config.admm_anderson,
        penalty: PenaltyParams {
            adapt: config.admm_penalty,
            ..PenaltyParams::default()
        },
    }
}

/// A static solve's stop rule: the characteristic norm with ε tied to the load
/// ([`Model::static_tolerance`]); dynamics unchanged.
fn static_config(config: &RunConfig, model: &Model) -> RunConfig {
    let mut c = config.clone();
    if c.static_solve {
        if let StopRule::Cn { eps } = c.stop {
            c.stop = StopRule::Cn {
                eps: model.static_tolerance(eps),
            };
        }
    }
    c
}

/// The multilevel solver's parameters of `config`: its `[solver]` options with the run's
/// stop rule (the paper's when `subspace_stop` is given) and iteration cap (default 100).
pub fn multilevel_params(config: &RunConfig) -> MultilevelParams {
    let mut p = config.multilevel;
    if !matches!(p.stop, MultilevelStop::Subspace { .. }) {
        p.stop = MultilevelStop::Shared(config.stop);
    }
    p.max_iterations = config.max_iterations.unwrap_or(100);
    p
}

/// JGS2 / VBD parameters of `config`: Jacobi by default for `jgs2`, Gauss–Seidel for `vbd`
/// (its published form: no safeguard).
fn jgs2_params(config: &RunConfig) -> Jgs2Params {
    let variant = config.variant.unwrap_or(match config.solver {
        SolverKind::Jgs2 => Variant::Jacobi,
        _ => Variant::GaussSeidel,
    });
    Jgs2Params {
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        variant,
        // VBD as published: its local Newton steps on the exact local energy need no
        // safeguard.
        safeguard: config
            .safeguard
            .unwrap_or(if config.solver == SolverKind::Jgs2 {
                Safeguard::Cut
            } else {
                Safeguard::Off
            }),
    }
}

/// The JGS2 subspace for `model` at time step `h` (shared by the Jacobi and Gauss–Seidel
/// variants): read from `cache_dir` when a valid artifact with the same key is there, else
/// built (and written there when a directory is given).
///
/// It is built for the inertia weight of the integrator's steady steps, 1/ĥ² with
/// ĥ = [`crate::problem::Integrator::steady_h`] (h under implicit Euler, 2h/3 under BDF2,
/// whose first step alone runs at 1/h²): over 40 BDF2 steps JGS2 took 43, 364, 40 and 381
/// iterations on the bundled cantilever, stiff_soft, twist and drop with the subspace at 2h/3,
/// against 62, 488, 40 and 427 with it at h.
pub fn load_or_build_subspace(
    model: &Model,
    h: f64,
    opts: &SubspaceOptions,
    cache_dir: Option<&Path>,
) -> Result<Arc<Jgs2Subspace>> {
    let h = model.integrator.steady_h(h);
    let (sub, origin, warnings) = load_or_build(model, h, opts, cache_dir)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if let SubspaceOrigin::Built(p) = origin {
        let s = &sub.stats;
        eprintln!(
            "jgs2 precompute: {:.2} s (factor {:.2}, basis {:.2}, eigen {:.2}, cubature {:.2}), {:.0} B/vertex{}",
            s.total_s,
            s.factor_s,
            s.basis_s,
            s.eigen_s,
            s.cubature_s,
            s.bytes_per_vertex,
            p.map(|p| format!(", cached at {}", p.display())).unwrap_or_default()
        );
    }
    Ok(Arc::new(sub))
}

/// A simulation ready to step on the chosen backend.
pub struct Setup {
    /// The simulation.
    pub sim: Simulation,
    /// The GPU adapter's description, or `None` when everything runs on the CPU.
    pub adapter: Option<String>,
    /// Where it runs and why (updated when `auto` had to fall back to the CPU).
    pub choice: BackendChoice,
    /// With `--solver auto`: the solver the rule picked for that backend, and why.
    pub auto: Option<Pick>,
}

/// Builds the simulation of `built` on `backend` (resolved with [`Backend::resolve`]; see
/// [`setup_on`]).
pub fn setup(built: &BuiltScene, backend: Backend, cache_dir: Option<&Path>) -> Result<Setup> {
    setup_on(built, backend.resolve()?, cache_dir)
}

/// Builds the simulation of `built` where `choice` says ([`capabilities::device_path`] for
/// what each solver runs on the device):
/// - `newton`: the f64 solver; with a GPU its gradients and element Hessians come from the
///   WGSL kernels ([`DeviceElastic`]), the Cholesky and line-search energies stay on the CPU.
/// - `jgs2` / `vbd`: on a GPU the whole iteration runs on the device ([`DeviceJgs2`], f32),
///   except the strict retries of `inversion = "forbid"`, which run on the f64 reference
///   ([`SimOptions::strict_solver`]); on the CPU the f64 reference ([`Jgs2Solver`]).
/// - `qn`, `dot`, `lbfgs-h`: the same loop on the device backend (f32 kernels, the
///   prefactored solve in f64 on the CPU: [`DeviceBackend`]) or the f64 CPU backend
///   ([`CpuBackend`]).
/// - `multilevel`: with `--backend gpu` (not `auto`) its Newton direction — the levels'
///   block-Jacobi PCGs and the Jacobi-PCG smoother — runs on the device in f32
///   ([`crate::solver::multilevel::MultilevelSolver::attach_device`]) and so do the line
///   search's energies (decided in f64 on the host where f32 cannot tell); gradients, Hessian
///   terms and the step filter stay f64 on the CPU.
/// - `admm`: the same loop on the device backend (f32 local steps and residuals, the
///   prefactored x-step in f64 on the CPU) or the f64 CPU backend.
///
/// `auto` is resolved first, for the backend `choice` names ([`auto::resolve`]), and again for
/// the CPU when a GPU choice falls back.
///
/// One ladder: what no backend can run ([`capabilities::refusal`]) is an error; then a GPU
/// choice tries the device path unless [`capabilities::device_blocker`] says it cannot run the
/// scene. A device that is missing, too small for the model or blocked is an error when the
/// GPU was requested, and falls back to the f64 CPU path (saying why in the returned choice)
/// when it came from `auto`. Errors the CPU path would raise too (a bad option, a failed
/// precompute) are errors either way.
pub fn setup_on(
    built: &BuiltScene,
    mut choice: BackendChoice,
    cache_dir: Option<&Path>,
) -> Result<Setup> {
    let model = &built.model;
    let mut config = static_config(&built.config, model);
    let mut auto = auto::resolve(&mut config, model, choice.backend);
    refuse(&config, model)?;
    let static_increments = config.static_solve.then_some(config.steps);
    let base_options = || SimOptions {
        static_increments,
        ..SimOptions::default()
    };
    let h = config.h;
    let new_sim = |solver: Box<dyn StepSolver>, options: SimOptions| {
        let state = model.initial_state(&built.velocity);
        Simulation::with_options(model.clone(), state, h, solver, options)
    };
    // A subspace built for the device is kept for the CPU fallback (no second precompute).
    let mut subspace = None;
    if choice.backend == Backend::Gpu {
        let blocked = capabilities::device_blocker(&config, model, choice.requested);
        let failure = match blocked {
            Some(why) => JelloError::Invalid(why),
            None => match Device::new(Backend::Gpu) {
                Err(e) => e,
                Ok(device) => match on_device(&config, model, cache_dir, &mut subspace, device)? {
                    Ok(device) => {
                        let mut options = base_options();
                        options.strict_solver = device.strict_solver;
                        options.elastic = device.elastic;
                        return Ok(Setup {
                            sim: new_sim(device.solver, options)?,
                            adapter: Some(device.adapter),
                            choice,
                            auto,
                        });
                    }
                    Err(e) => e,
                },
            },
        };
        if choice.requested == Backend::Gpu {
            return Err(failure);
        }
        if let Some(p) = auto::resolve(&mut config, model, Backend::Cpu) {
            auto = Some(p);
            refuse(&config, model)?;
        }
        eprintln!("warning: {failure}; running {} on the CPU", config.solver);
        choice = BackendChoice::cpu(choice.requested, format!("{failure}; fell back to the CPU"));
    }
    let solver = build_solver(&config, model, cache_dir, subspace)?;
    Ok(Setup {
        sim: new_sim(solver, base_options())?,
        adapter: None,
        choice,
        auto,
    })
}

/// Builds the simulation of `built` with its solver's device path on `device`, a device the
/// caller already holds — typically a host application's own, adopted with
/// [`Device::from_wgpu`] (e.g. Bevy's render device in `bevy_jello`), so that the solver's
/// buffers and the host's drawing share one device. Solvers as in [`setup_on`] for a GPU
/// choice; `auto` is resolved for the GPU. No fallback: a solver without a device path for this
/// scene ([`capabilities::device_blocker`]) or a device too small for the model is an error,
/// and the caller decides whether to run on the CPU instead ([`setup_on`] with
/// [`Backend::Cpu`]).
pub fn setup_with_device(
    built: &BuiltScene,
    device: Device,
    cache_dir: Option<&Path>,
) -> Result<Setup> {
    let model = &built.model;
    let mut config = static_config(&built.config, model);
    let auto = auto::resolve(&mut config, model, Backend::Gpu);
    refuse(&config, model)?;
    if let Some(why) = capabilities::device_blocker(&config, model, Backend::Gpu) {
        return Err(JelloError::Invalid(why));
    }
    let info = device.info().clone();
    let mut subspace = None;
    let on = on_device(&config, model, cache_dir, &mut subspace, device)??;
    let options = SimOptions {
        static_increments: config.static_solve.then_some(config.steps),
        strict_solver: on.strict_solver,
        elastic: on.elastic,
    };
    let state = model.initial_state(&built.velocity);
    Ok(Setup {
        sim: Simulation::with_options(model.clone(), state, config.h, on.solver, options)?,
        adapter: Some(on.adapter),
        choice: BackendChoice {
            requested: Backend::Gpu,
            backend: Backend::Gpu,
            adapter: Some(info),
            reason: "a device adopted from the host application".into(),
        },
        auto,
    })
}

/// A solver's device path, built ([`on_device`]).
struct OnDevice {
    solver: Box<dyn StepSolver>,
    strict_solver: Option<Box<dyn StepSolver>>,
    elastic: Option<Box<dyn ElasticTerms + Send>>,
    adapter: String,
}

/// Builds `config.solver`'s device path. The outer error is one the CPU path would raise too;
/// the inner one is the device's (none, or too small for the model), which `auto` falls back
/// from. A JGS2 subspace it builds is left in `subspace`.
fn on_device(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
    subspace: &mut Option<Arc<Jgs2Subspace>>,
    device: Device,
) -> Result<Result<OnDevice>> {
    let adapter = device.info().to_string();
    let mut strict_solver = None;
    let mut elastic: Option<Box<dyn ElasticTerms + Send>> = None;
    let solver: Result<Box<dyn StepSolver>> = match config.solver {
        SolverKind::Newton => {
            let solver = build_solver(config, model, cache_dir, None)?;
            DeviceElastic::on_device(model, device).map(|d| {
                elastic = Some(Box::new(d));
                solver
            })
        }
        SolverKind::Jgs2 | SolverKind::Vbd => {
            if config.solver == SolverKind::Jgs2 {
                *subspace = Some(load_or_build_subspace(
                    model,
                    config.h,
                    &config.subspace,
                    cache_dir,
                )?);
            }
            match DeviceJgs2::new(device, model, jgs2_params(config), subspace.clone()) {
                Ok(s) => {
                    // The device has no strict inversion filter: forbid's strict retries run
                    // on the f64 reference (same subspace, no second precompute).
                    strict_solver = Some(build_solver(config, model, cache_dir, subspace.clone())?);
                    Ok(Box::new(s))
                }
                Err(e) => Err(e),
            }
        }
        SolverKind::Qn | SolverKind::Dot | SolverKind::LbfgsH => DeviceBackend::new(device, model)
            .and_then(|b| lbfgs_solver(config, model, b, cache_dir)),
        SolverKind::Admm => match DeviceBackend::new(device, model) {
            // The solver's own refusals (bad options) hold on the CPU too.
            Ok(b) => Ok(Box::new(AdmmSolver::with_backend(
                model,
                b,
                admm_params(config),
            )?)),
            Err(e) => Err(e),
        },
        SolverKind::Multilevel => {
            let mut solver = multilevel_solver(config, model, cache_dir)?;
            solver.attach_device(device, model).map(|()| {
                let s: Box<dyn StepSolver> = Box::new(solver);
                s
            })
        }
    };
    Ok(solver.map(|solver| OnDevice {
        solver,
        strict_solver,
        elastic,
        adapter,
    }))
}
