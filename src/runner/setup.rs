//! Building the simulation a scene asks for on the chosen backend: solver, device, subspace.

use crate::error::{JelloError, Result};
use crate::gpu::{Backend, BackendChoice, Device};
use crate::material::EigenFilter;
use crate::problem::{DeviceElastic, ElasticTerms, Model};
use crate::scene::{BuiltScene, RunConfig, FILTER_SOLVERS};
use crate::sim::Simulation;
use crate::solver::admm::{AdmmParams, AdmmSolver};
use crate::solver::backend::{CpuBackend, DeviceBackend, PotentialBackend};
use crate::solver::dot::{load_or_build_decomposition, DecompositionOrigin, DotParams, DotSolver};
use crate::solver::jgs2::{
    load_or_build, DeviceJgs2, Jgs2Params, Jgs2Solver, Jgs2Subspace, Safeguard, SubspaceOptions,
    SubspaceOrigin, Variant,
};
use crate::solver::multilevel::{
    build_solver as build_multilevel, MultilevelParams, MultilevelStop, Preconditioner,
};
use crate::solver::pd::GlobalOptions;
use crate::solver::qn::{QnParams, QnSolver};
use crate::solver::{HessianFilter, NewtonParams, NewtonSolver, StepSolver, StopRule};
use std::path::Path;
use std::sync::Arc;

/// Builds the solver named in `config` for `model`.
pub fn make_solver(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
) -> Result<Box<dyn StepSolver>> {
    make_solver_with(config, model, cache_dir, None)
}

/// [`make_solver`] reusing a JGS2 subspace already built for this model and h.
fn make_solver_with(
    config: &RunConfig,
    model: &Model,
    cache_dir: Option<&Path>,
    subspace: Option<Arc<Jgs2Subspace>>,
) -> Result<Box<dyn StepSolver>> {
    let config = &static_config(config, model);
    refuse_strain_limits(config, model)?;
    refuse_eigen_filter(config)?;
    refuse_ipc_contact(config, model)?;
    match config.solver.as_str() {
        "newton" => {
            let params = NewtonParams {
                stop: config.stop,
                max_iterations: config.max_iterations.unwrap_or(100),
                filter: config.eigen_filter.unwrap_or_default(),
                ..NewtonParams::default()
            };
            Ok(Box::new(NewtonSolver::new(model, params)?))
        }
        "vbd" | "jgs2" => {
            let params = jgs2_params(config);
            if config.solver == "vbd" {
                return Ok(Box::new(Jgs2Solver::vbd(model, params)));
            }
            let subspace = match subspace {
                Some(s) => s,
                None => load_or_build_subspace(model, config.h, &config.subspace, cache_dir)?,
            };
            Ok(Box::new(Jgs2Solver::jgs2(model, params, subspace)?))
        }
        "qn" | "dot" | "lbfgs-h" => lbfgs_solver(
            config,
            model,
            CpuBackend::new(model.num_vertices()),
            cache_dir,
        ),
        "multilevel" => {
            let params = multilevel_params(config);
            let (mut solver, warnings) = build_multilevel(model, params, cache_dir)?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            if params.smoother == Preconditioner::Jgs2 {
                // The same subspace (and cache) as `--solver jgs2`.
                let subspace = match subspace {
                    Some(s) => s,
                    None => load_or_build_subspace(model, config.h, &config.subspace, cache_dir)?,
                };
                solver.set_jgs2_subspace(model, subspace)?;
            }
            Ok(Box::new(solver))
        }
        "admm" => {
            if config.static_solve {
                return Err(JelloError::Invalid(
                    "solver admm does not handle static solves yet (its splitting needs the \
                     inertia term): use qn or newton"
                        .into(),
                ));
            }
            Ok(Box::new(AdmmSolver::new(model, admm_params(config))?))
        }
        other => Err(JelloError::Invalid(format!(
            "solver `{other}` is not available in this build"
        ))),
    }
}

/// Hard strain limits ([`crate::problem::StrainLimit`]) are a constraint only ADMM's z-step
/// enforces; any other solver would silently ignore them, so it refuses the model.
fn refuse_strain_limits(config: &RunConfig, model: &Model) -> Result<()> {
    if model.strain_limits.is_empty() || config.solver == "admm" {
        return Ok(());
    }
    Err(JelloError::Invalid(format!(
        "material.strain_limit: hard strain limits are enforced only by solver admm, not {}",
        config.solver
    )))
}

/// IPC contact between objects ([`Model::contact`]) needs the contact Hessian and the CCD
/// line search of projected Newton; the other solvers would ignore the contact in their local
/// or preconditioning steps, so they refuse the model.
fn refuse_ipc_contact(config: &RunConfig, model: &Model) -> Result<()> {
    if model.contact.is_none() || matches!(config.solver.as_str(), "newton" | "multilevel") {
        return Ok(());
    }
    Err(JelloError::Invalid(format!(
        "contact.ipc: IPC contact between objects runs on solvers newton and multilevel only, \
         not {}",
        config.solver
    )))
}

/// `[solver] eigen_filter` is checked against the scene's solver when the scene is built; a
/// `--solver` override can still pick a solver that has no element Hessian to filter, and is
/// refused the same way rather than silently dropping the option.
fn refuse_eigen_filter(config: &RunConfig) -> Result<()> {
    if config.eigen_filter == Some(HessianFilter::Adaptive) && config.solver != "newton" {
        return Err(JelloError::Invalid(format!(
            "solver.eigen_filter: adaptive applies only to solver newton ({} builds its \
             Hessian once per step, so it takes clamp or abs)",
            config.solver
        )));
    }
    if config.eigen_filter.is_none() || FILTER_SOLVERS.contains(&config.solver.as_str()) {
        return Ok(());
    }
    Err(JelloError::Invalid(format!(
        "solver.eigen_filter: applies only to solver {}, not {}",
        FILTER_SOLVERS.join(", "),
        config.solver
    )))
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
    let subdomains = match config.solver.as_str() {
        "lbfgs-h" => 1,
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
    if config.solver == "qn" {
        return Ok(Box::new(QnSolver::new(model, backend, qn_params(config))?));
    }
    let params = dot_params(config);
    let decomposition = load_partition(model, params.subdomains, cache_dir)?;
    Ok(Box::new(DotSolver::with_decomposition(
        model,
        backend,
        params,
        decomposition,
        &config.solver,
    )?))
}

/// DOT's partition of `model` into `subdomains` (cached in `cache_dir`), with one line on
/// stderr saying what it is and where it came from.
pub fn load_partition(
    model: &Model,
    subdomains: usize,
    cache_dir: Option<&Path>,
) -> Result<Arc<jello_precompute::partition::Decomposition>> {
    let t0 = std::time::Instant::now();
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
    }
}

/// Why the device L-BFGS family (qn, dot, lbfgs-h) cannot run `built`, if it cannot: static
/// solves and spheres or boxes (surface contact) stay on the f64 CPU path for now.
fn qn_device_blocker(built: &BuiltScene) -> Option<String> {
    if built.config.static_solve {
        return Some(format!(
            "a static solve with {} runs on the CPU backend",
            built.config.solver
        ));
    }
    built
        .model
        .obstacles
        .iter()
        .any(|o| o.is_bounded())
        .then(|| {
            format!(
                "{} on the device handles half-space obstacles only (spheres and boxes act \
                 through surface primitive pairs, not on the device yet)",
                built.config.solver
            )
        })
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
    let variant = match (config.variant.as_deref(), config.solver.as_str()) {
        (Some("jacobi"), _) | (None, "jgs2") => Variant::Jacobi,
        _ => Variant::GaussSeidel,
    };
    Jgs2Params {
        stop: config.stop,
        max_iterations: config.max_iterations.unwrap_or(1000),
        variant,
        // VBD as published: its local Newton steps on the exact local energy need no
        // safeguard.
        safeguard: config.safeguard.unwrap_or(if config.solver == "jgs2" {
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
}

/// Builds the simulation of `built` on `backend` (resolved with [`Backend::resolve`]; see
/// [`setup_on`]).
pub fn setup(built: &BuiltScene, backend: Backend, cache_dir: Option<&Path>) -> Result<Setup> {
    setup_on(built, backend.resolve()?, cache_dir)
}

/// Builds the simulation of `built` where `choice` says:
/// - `newton`: the f64 solver; with a GPU its gradients and element Hessians come from the
///   WGSL kernels ([`DeviceElastic`]), the Cholesky and line-search energies stay on the CPU.
/// - `jgs2` / `vbd`: on a GPU the whole iteration runs on the device ([`DeviceJgs2`], f32),
///   except the strict retries of `inversion = "forbid"`, which run on the f64 reference
///   ([`Simulation::set_strict_solver`]); on the CPU the f64 reference ([`Jgs2Solver`]).
/// - `qn`, `dot`, `lbfgs-h`: the same loop on the device backend (f32 kernels, the prefactored solve in f64 on
///   the CPU: [`DeviceBackend`]) or the f64 CPU backend ([`CpuBackend`]); scenes the device
///   backend cannot run (static solves, spheres or boxes) use the CPU.
/// - `multilevel`: with `--backend gpu` (not `auto`) its Newton direction — the levels'
///   block-Jacobi PCGs and the Jacobi-PCG smoother — runs on the device in f32
///   ([`crate::solver::multilevel::MultilevelSolver::attach_device`]) and so do the line
///   search's energies (decided in f64 on the host where f32 cannot tell); gradients, Hessian
///   terms and the step filter stay f64 on the CPU.
/// - `admm`: the same loop on the device backend (f32 local steps and residuals, the
///   prefactored x-step in f64 on the CPU) or the f64 CPU backend; what ADMM refuses
///   (obstacles, static solves) is an error on either.
///
/// A GPU choice that cannot be honoured is an error when the GPU was requested, and falls back
/// to the CPU (saying why in the returned choice) when it came from `auto`.
pub fn setup_on(
    built: &BuiltScene,
    mut choice: BackendChoice,
    cache_dir: Option<&Path>,
) -> Result<Setup> {
    let config = &built.config;
    let model = &built.model;
    refuse_strain_limits(config, model)?;
    refuse_eigen_filter(config)?;
    refuse_ipc_contact(config, model)?;
    let state = model.initial_state(&built.velocity);
    let strict = choice.requested == Backend::Gpu;
    let fall_back = |choice: &mut BackendChoice, why: String| {
        eprintln!("warning: {why}; running {} on the CPU", config.solver);
        *choice = BackendChoice::cpu(choice.requested, format!("{why}; fell back to the CPU"));
    };
    if choice.backend == Backend::Gpu
        && matches!(config.solver.as_str(), "jgs2" | "vbd")
        && config.static_solve
    {
        // The device iteration has no static (inertia-free) form.
        let why = format!(
            "a static solve with {} runs on the CPU backend",
            config.solver
        );
        if strict {
            return Err(JelloError::Invalid(why));
        }
        fall_back(&mut choice, why);
    }
    if choice.backend == Backend::Gpu
        && config.solver == "admm"
        && !(model.strain_limits.is_empty() && model.obstacles.is_empty())
    {
        // The limited prox and its KKT forces, and contact (the QP on the factor, the KKT
        // residual), are f64 CPU work only.
        let why = if model.obstacles.is_empty() {
            "admm with hard strain limits (material.strain_limit) runs on the CPU backend"
        } else {
            "admm with obstacles (obstacles[0]: contact) runs on the CPU backend"
        }
        .to_string();
        if strict {
            return Err(JelloError::Invalid(why));
        }
        fall_back(&mut choice, why);
    }
    if choice.backend == Backend::Gpu && config.solver == "admm" {
        // The same loop on the device backend; what ADMM refuses on the CPU (obstacles, static
        // solves) it refuses there too, with the same line.
        if config.static_solve {
            make_solver(config, model, cache_dir)?;
        }
        match Device::new(Backend::Gpu) {
            Err(e) if strict => return Err(e),
            Err(e) => fall_back(&mut choice, e.to_string()),
            Ok(device) => {
                let adapter = device.info().to_string();
                match DeviceBackend::new(device, model) {
                    Ok(backend) => {
                        // The solver's refusals (obstacles, bad options) hold on the CPU too.
                        let solver = AdmmSolver::with_backend(model, backend, admm_params(config))?;
                        let sim =
                            Simulation::new(model.clone(), state, config.h, Box::new(solver))?;
                        return Ok(Setup {
                            sim,
                            adapter: Some(adapter),
                            choice,
                        });
                    }
                    Err(e) if strict => return Err(e),
                    // `auto`: a device that cannot hold this model falls back to the CPU.
                    Err(e) => fall_back(&mut choice, e.to_string()),
                }
            }
        }
    }
    if choice.backend == Backend::Gpu && matches!(config.solver.as_str(), "qn" | "dot" | "lbfgs-h")
    {
        match qn_device_blocker(built) {
            Some(why) if strict => return Err(JelloError::Invalid(why)),
            Some(why) => fall_back(&mut choice, why),
            None => match Device::new(Backend::Gpu) {
                Err(e) if strict => return Err(e),
                Err(e) => fall_back(&mut choice, e.to_string()),
                Ok(device) => {
                    let adapter = device.info().to_string();
                    let solver = DeviceBackend::new(device, model)
                        .and_then(|b| lbfgs_solver(config, model, b, cache_dir));
                    match solver {
                        Ok(solver) => {
                            let sim = Simulation::new(model.clone(), state, config.h, solver)?;
                            return Ok(Setup {
                                sim,
                                adapter: Some(adapter),
                                choice,
                            });
                        }
                        Err(e) if strict => return Err(e),
                        Err(e) => fall_back(&mut choice, e.to_string()),
                    }
                }
            },
        }
    }
    // A subspace built for the device is kept for the CPU fallback (no second precompute).
    let mut built_subspace = None;
    if choice.backend == Backend::Gpu && matches!(config.solver.as_str(), "jgs2" | "vbd") {
        match Device::new(Backend::Gpu) {
            Err(e) if strict => return Err(e),
            Err(e) => fall_back(&mut choice, e.to_string()),
            Ok(device) => {
                let adapter = device.info().to_string();
                let params = jgs2_params(config);
                let subspace = (config.solver == "jgs2")
                    .then(|| load_or_build_subspace(model, config.h, &config.subspace, cache_dir))
                    .transpose()?;
                built_subspace.clone_from(&subspace);
                match DeviceJgs2::new(device, model, params, subspace) {
                    Ok(solver) => {
                        let mut sim =
                            Simulation::new(model.clone(), state, config.h, Box::new(solver))?;
                        // The device has no strict inversion filter: forbid's strict retries
                        // run on the f64 reference (same subspace, no second precompute).
                        sim.set_strict_solver(make_solver_with(
                            config,
                            model,
                            cache_dir,
                            built_subspace.clone(),
                        )?);
                        return Ok(Setup {
                            sim,
                            adapter: Some(adapter),
                            choice,
                        });
                    }
                    Err(e) if strict => return Err(e),
                    // `auto`: a device that cannot hold this model (e.g. a subspace larger
                    // than a storage binding) falls back to the CPU reference.
                    Err(e) => fall_back(&mut choice, e.to_string()),
                }
            }
        }
    }
    if choice.backend == Backend::Gpu && config.solver == "multilevel" && !strict {
        // Opt-in: the device path uploads H every iteration, solves the SMS coarse correction on
        // the host and has not been profiled on a hardware GPU, so `auto` keeps the f64 path.
        fall_back(
            &mut choice,
            "multilevel runs its direction on the GPU only with --backend gpu".to_string(),
        );
    }
    if choice.backend == Backend::Gpu && config.solver == "multilevel" {
        // The Newton direction (levels and smoother) and the line search's energies on the
        // device; gradients, Hessian terms and the step filter stay f64 on the host.
        match Device::new(Backend::Gpu) {
            Err(e) if strict => return Err(e),
            Err(e) => fall_back(&mut choice, e.to_string()),
            Ok(device) => {
                let adapter = device.info().to_string();
                let (mut solver, warnings) =
                    build_multilevel(model, multilevel_params(config), cache_dir)?;
                for w in warnings {
                    eprintln!("warning: {w}");
                }
                match solver.attach_device(device) {
                    Ok(()) => {
                        let mut sim =
                            Simulation::new(model.clone(), state, config.h, Box::new(solver))?;
                        if config.static_solve {
                            sim = sim.into_static(config.steps)?;
                        }
                        return Ok(Setup {
                            sim,
                            adapter: Some(adapter),
                            choice,
                        });
                    }
                    Err(e) if strict => return Err(e),
                    Err(e) => fall_back(&mut choice, e.to_string()),
                }
            }
        }
    }
    let solver = make_solver_with(config, model, cache_dir, built_subspace)?;
    let mut sim = Simulation::new(model.clone(), state, config.h, solver)?;
    if config.static_solve {
        sim = sim.into_static(config.steps)?;
    }
    let mut adapter = None;
    if choice.backend == Backend::Gpu && config.solver == "newton" {
        match DeviceElastic::new(model, Backend::Gpu) {
            Ok(d) => {
                adapter = Some(d.backend_name());
                sim.set_elastic_backend(Box::new(d));
            }
            Err(e) if strict => return Err(e),
            Err(e) => fall_back(&mut choice, e.to_string()),
        }
    }
    Ok(Setup {
        sim,
        adapter,
        choice,
    })
}
