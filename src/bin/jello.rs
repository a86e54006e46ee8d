//! The `jello` command line: headless runs, mesh tools, adapter info.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use jello::scene::Scene;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

#[derive(Parser)]
#[command(
    name = "jello",
    version,
    about = "GPU-first elastodynamics: tet FEM, hyperelastic materials, implicit time stepping"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scene headless; writes DIR/frames (.vtu + .pvd) and DIR/stats.json.
    Run {
        /// Scene file (TOML).
        scene: PathBuf,
        /// Override the scene's solver (newton, jgs2, vbd, qn, admm, dot, lbfgs-h, multilevel).
        #[arg(long)]
        solver: Option<String>,
        /// JGS2/VBD sweep: jacobi (JGS2's default) or gs (coloured Gauss–Seidel, VBD's default).
        #[arg(long)]
        variant: Option<String>,
        /// Where element work runs: auto (GPU when an adapter exists, else CPU), cpu (f64
        /// reference) or gpu (wgpu kernels; error without an adapter).
        #[arg(long, default_value = "auto")]
        backend: String,
        /// Override the number of steps (1 to 1e7).
        #[arg(long, allow_negative_numbers = true, value_parser = steps_parser())]
        steps: Option<u64>,
        /// Output directory (the run owns it: see --overwrite and --resume).
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Replace an earlier run in DIR: removes the files its manifest lists, nothing else.
        #[arg(long, conflicts_with = "resume")]
        overwrite: bool,
        /// Continue the run in DIR from its last checkpoint (same scene settings, solver and
        /// backend; --steps or the scene's steps may extend it).
        #[arg(long)]
        resume: bool,
        /// Exit with status 3 when any step did not meet the stop rule.
        #[arg(long)]
        require_converged: bool,
        /// Stop rule: cn (characteristic norm) or dx (max position change).
        #[arg(long)]
        stop: Option<String>,
        /// Record per-iteration residual and energy in stats.json.
        #[arg(long)]
        trace: bool,
        /// Also write one .vtu per object per frame (frames/frame_NNNNN.objectI.vtu) and a .pvd
        /// per object (frames/objectI.pvd), as `output.vtu_per_object = true`.
        #[arg(long)]
        vtu_per_object: bool,
        /// Also write an .obj surface per frame.
        #[arg(long)]
        obj: bool,
        /// Also render a PNG per frame (fixed camera framing the scene).
        #[arg(long)]
        png: bool,
        /// Colour each PNG frame (after frame 0) by the per-vertex residual |grad E| (N, log
        /// scale, viridis; pinned vertices grey; a colour bar gives the min and max) after K
        /// iterations of the step that produced it, re-solved from that step's start with the
        /// same solver capped at K (f64 CPU). Needs --png or `output.png = true`.
        #[arg(
            long,
            value_name = "K",
            allow_negative_numbers = true,
            value_parser = residual_iteration_parser()
        )]
        residual_iteration: Option<u64>,
    },
    /// Run a scene on the f64 CPU path and on the GPU in lockstep and report per-step vertex
    /// deviations; exits non-zero when a step deviates more than --max-deviation.
    Compare {
        /// Scene file (TOML).
        scene: PathBuf,
        /// Steps to compare (default: the scene's).
        #[arg(long, allow_negative_numbers = true, value_parser = steps_parser())]
        steps: Option<u64>,
        /// Override the scene's solver.
        #[arg(long)]
        solver: Option<String>,
        /// JGS2/VBD sweep: jacobi or gs.
        #[arg(long)]
        variant: Option<String>,
        /// Largest allowed per-step max deviation, fraction of the bounding-box diagonal.
        #[arg(long, default_value_t = jello::compare::DEFAULT_MAX_DEVIATION)]
        max_deviation: f64,
        /// Also write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// List GPU adapters with their limits and features, and what --backend auto would use.
    Info,
    /// Build (or verify) a scene's precompute artifact in SCENE_DIR/.jello-cache: the JGS2
    /// subspace, DOT's METIS partition for `solver = "dot"` / `"lbfgs-h"`, or the SMS basis and
    /// cubature for `solver = "multilevel"`.
    Precompute {
        /// Scene file (TOML).
        scene: PathBuf,
    },
    /// Mesh tools.
    Mesh {
        #[command(subcommand)]
        cmd: MeshCmd,
    },
}

#[derive(Subcommand)]
enum MeshCmd {
    /// Counts, volume, element quality and bounding box of a mesh file.
    Info {
        /// Mesh file (.msh, .node/.ele, .mesh, .vtk).
        file: PathBuf,
    },
    /// Convert between formats (by extension: .vtu, .obj, .ply, .node/.ele, .msh).
    Convert {
        /// Input mesh.
        input: PathBuf,
        /// Output mesh.
        output: PathBuf,
    },
}

/// Exit status of a run interrupted by SIGINT/SIGTERM/SIGHUP (128 + SIGINT, as shells report).
const EXIT_INTERRUPTED: i32 = 130;
/// Exit status of a complete run with an unconverged step under `--require-converged`.
const EXIT_NOT_CONVERGED: i32 = 3;

/// `--residual-iteration`: 1 to [`jello::runner::MAX_RESIDUAL_ITERATION`].
fn residual_iteration_parser() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=jello::runner::MAX_RESIDUAL_ITERATION as u64)
}

/// `--steps`: 1 to [`jello::runner::MAX_STEPS`].
fn steps_parser() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=jello::runner::MAX_STEPS as u64)
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| clap_exit(e));
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line with the cause chain, non-zero exit, no panic.
            // JelloError::Io's Display already includes its source; skip causes already shown.
            let mut msg = String::new();
            for c in e.chain() {
                let c = c.to_string();
                if !msg.contains(&c) {
                    if !msg.is_empty() {
                        msg.push_str(": ");
                    }
                    msg.push_str(&c);
                }
            }
            let msg = msg.replace('\n', " ");
            eprintln!("error: {msg}");
            std::process::exit(1);
        }
    }
}

/// Prints a command-line error the way clap does (message, usage, help hint; exit 2), except
/// that the first line always says what was wrong: clap's own first line does not for a
/// missing argument (the names follow on the next lines) or a missing subcommand (it prints the
/// help alone).
fn clap_exit(e: clap::Error) -> ! {
    use clap::error::ErrorKind as K;
    let rendered = e.render().to_string();
    let text = match e.kind() {
        K::MissingRequiredArgument => {
            // "error: the following required arguments were not provided:\n  <SCENE>\n\n..."
            let mut lines = rendered.lines();
            let first = lines.next().unwrap_or_default().trim_end_matches(':');
            let missing: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let rest: Vec<&str> = lines.collect();
            format!("{first}: {}\n\n{}\n", missing.join(" "), rest.join("\n"))
        }
        K::DisplayHelpOnMissingArgumentOrSubcommand | K::MissingSubcommand => {
            format!("error: no command given; one of the commands below is required\n\n{rendered}")
        }
        _ => e.exit(),
    };
    eprint!("{text}");
    std::process::exit(2);
}

fn run(cli: Cli) -> Result<i32> {
    match cli.cmd {
        Cmd::Run {
            scene,
            solver,
            variant,
            backend,
            steps,
            out,
            overwrite,
            resume,
            require_converged,
            stop,
            trace,
            vtu_per_object,
            obj,
            png,
            residual_iteration,
        } => cmd_run(RunArgs {
            scene_path: scene,
            solver,
            variant,
            backend,
            steps,
            out,
            overwrite,
            resume,
            require_converged,
            stop,
            trace,
            vtu_per_object,
            obj,
            png,
            residual_iteration,
        }),
        Cmd::Precompute { scene } => cmd_precompute(scene).map(|()| 0),
        Cmd::Info => {
            println!("jello {}", env!("CARGO_PKG_VERSION"));
            println!("{}", jello::gpu::list_adapters());
            match jello::gpu::Backend::Auto.resolve() {
                Ok(c) => println!("--backend auto: {c}"),
                Err(e) => println!("--backend auto: {e}"),
            }
            println!("on a GPU backend (f32; the cpu backend runs every solver in f64):");
            println!("{}", jello::runner::capabilities::describe());
            Ok(0)
        }
        Cmd::Compare {
            scene,
            steps,
            solver,
            variant,
            max_deviation,
            json,
        } => cmd_compare(scene, steps, solver, variant, max_deviation, json).map(|()| 0),
        Cmd::Mesh { cmd } => match cmd {
            MeshCmd::Info { file } => {
                let loaded = jello::mesh::read_mesh(&file)?;
                for w in &loaded.warnings {
                    eprintln!("warning: {w}");
                }
                println!("{}", jello::mesh::MeshInfo::new(&loaded.mesh));
                Ok(0)
            }
            MeshCmd::Convert { input, output } => {
                let loaded = jello::mesh::convert(&input, &output)?;
                for w in &loaded.warnings {
                    eprintln!("warning: {w}");
                }
                println!(
                    "wrote {} ({} vertices, {} tets)",
                    output.display(),
                    loaded.mesh.num_vertices(),
                    loaded.mesh.num_tets()
                );
                Ok(0)
            }
        },
    }
}

/// `jello run`'s arguments.
struct RunArgs {
    scene_path: PathBuf,
    solver: Option<String>,
    variant: Option<String>,
    backend: String,
    steps: Option<u64>,
    out: PathBuf,
    overwrite: bool,
    resume: bool,
    require_converged: bool,
    stop: Option<String>,
    trace: bool,
    vtu_per_object: bool,
    obj: bool,
    png: bool,
    residual_iteration: Option<u64>,
}

/// Installs the SIGINT/SIGTERM/SIGHUP handler: the first signal sets `flag` (the run finishes
/// its step's writes and stops, status `interrupted`); a second one exits at once.
fn on_signal(flag: Arc<AtomicBool>, bar: Arc<OnceLock<indicatif::ProgressBar>>) -> Result<()> {
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!(
                "error: interrupted again: stopped at once (the run directory still says \
                 `running`; --resume continues from its last frame)"
            );
            std::process::exit(EXIT_INTERRUPTED);
        }
        if let Some(b) = bar.get() {
            b.set_message("interrupt: finishing this step's writes (again to stop at once)");
        }
    })
    .context("installing the signal handler")
}

fn cmd_run(a: RunArgs) -> Result<i32> {
    use jello::output::RunStatus;
    use jello::solver::StopRule;
    // Flags first: a misspelt flag is reported before any file is read.
    let backend: jello::gpu::Backend = a
        .backend
        .parse()
        .map_err(|e| anyhow::anyhow!("--backend: {e}"))?;
    let solver = a.solver.as_deref().map(solver_name).transpose()?;
    let variant = a.variant.as_deref().map(variant_name).transpose()?;
    if let Some(s) = &a.stop {
        if !matches!(s.as_str(), "cn" | "dx") {
            bail!("--stop: unknown rule `{s}` (expected cn or dx)");
        }
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let bar_slot = Arc::new(OnceLock::new());
    on_signal(cancel.clone(), bar_slot.clone())?;

    let scene_path = &a.scene_path;
    let scene = Scene::load(scene_path)?;
    let mut built = scene.build()?;
    for w in &built.warnings {
        eprintln!("warning: {w}");
    }
    let c = &mut built.config;
    if let Some(s) = solver {
        c.set_solver(s);
    }
    if let Some(v) = variant {
        c.variant = Some(v);
    }
    if let Some(n) = a.steps {
        c.steps = usize::try_from(n).context("--steps")?;
    }
    if let Some(s) = &a.stop {
        c.stop = match (s.as_str(), c.stop) {
            ("cn", StopRule::Cn { eps }) => StopRule::Cn { eps },
            ("cn", _) => StopRule::Cn { eps: 1e-5 },
            ("dx", StopRule::Dx { tol }) => StopRule::Dx { tol },
            _ => StopRule::Dx { tol: 1e-3 },
        };
    }
    if a.vtu_per_object {
        if !c.output.vtu {
            bail!("--vtu-per-object: the scene sets `output.vtu = false`");
        }
        c.output.vtu_per_object = true;
    }
    if a.obj {
        c.output.obj = true;
    }
    if a.png {
        c.output.png = true;
    }
    let total = c.steps;
    let verts = built.model.num_vertices();
    let tets = built.model.mesh.num_tets();
    let h = c.h;
    let out = &a.out;
    let opts = jello::runner::RunOptions {
        out_dir: Some(out.clone()),
        trace: a.trace,
        backend,
        overwrite: a.overwrite,
        resume: a.resume,
        cancel: Some(cancel),
        residual_iteration: a
            .residual_iteration
            .map(usize::try_from)
            .transpose()
            .context("--residual-iteration")?,
    };
    let prepared = jello::runner::Run::prepare(scene_path, built, &opts)
        .with_context(|| format!("running {}", scene_path.display()))?;
    for n in prepared.notes() {
        eprintln!("note: {n}");
    }
    let start = prepared.start_step();
    if prepared.already_complete() {
        println!(
            "{}: the run is already complete ({total} steps); nothing to do (pass --steps N to \
             extend it)",
            out.display()
        );
        return Ok(0);
    }
    eprintln!(
        "jello: {} — {verts} vertices, {tets} tets, solver {}{}, h = {h} s, {total} steps{}",
        scene_path.display(),
        prepared.solver(),
        prepared
            .auto_pick()
            .map(|p| format!(" (auto: {})", p.reason))
            .unwrap_or_default(),
        if start > 0 {
            format!(", resuming after step {start}")
        } else {
            String::new()
        }
    );
    eprintln!("{}", prepared.choice());
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(total as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_position(start as u64);
        let _ = bar_slot.set(b.clone());
        b
    });
    let result = prepared.execute(|step, r| {
        let line = format!(
            "step {step}/{total}: {} it, residual {:.2e}{}{}, {:.1} ms",
            r.iterations,
            r.residual,
            if r.converged { "" } else { " (NOT converged)" },
            if r.substeps > 1 {
                format!(", {} substeps", r.substeps)
            } else {
                String::new()
            },
            r.wall_ms
        );
        // Invariant violations (inverted elements, obstacle penetrations, failed steps) are
        // printed whatever the display: they must not scroll away in a progress message.
        for w in &r.warnings {
            match &bar {
                Some(b) => b.println(format!("warning: {w}")),
                None => eprintln!("warning: {w}"),
            }
        }
        match &bar {
            Some(b) => {
                b.set_position(step as u64);
                b.set_message(line);
            }
            None => eprintln!("{line}"),
        }
    });
    if let Some(b) = &bar {
        // A stopped run's bar goes, so its one line stands alone.
        match &result {
            Ok((_, s)) if s.status == RunStatus::Complete => b.finish(),
            _ => b.finish_and_clear(),
        }
    }
    let (_sim, stats) = result.with_context(|| format!("running {}", scene_path.display()))?;
    if stats.status == RunStatus::Interrupted {
        eprintln!(
            "error: interrupted after step {} of {total}; the run in {} continues with --resume",
            stats.completed_steps,
            out.display()
        );
        return Ok(EXIT_INTERRUPTED);
    }
    let done = stats.listed_steps();
    println!(
        "backend {}{}: {} steps{}, {}/{} converged, {} iterations total, {:.1} ms total \
         (+{:.1} ms writing outputs); wrote {}",
        stats.backend,
        stats
            .adapter
            .as_ref()
            .map(|a| format!(" ({a})"))
            .unwrap_or_default(),
        done,
        if start > 0 {
            format!(" (resumed after step {start})")
        } else {
            String::new()
        },
        stats.converged_steps,
        done,
        stats.total_iterations,
        stats.total_wall_ms,
        stats.total_output_ms,
        out.display()
    );
    if a.require_converged {
        if let Some(first) = stats.first_unconverged_step {
            eprintln!(
                "error: step {first} did not converge ({} of {done} steps did not; \
                 --require-converged)",
                done - stats.converged_steps
            );
            return Ok(EXIT_NOT_CONVERGED);
        }
    }
    Ok(0)
}

fn cmd_precompute(scene_path: PathBuf) -> Result<()> {
    use jello::scene::SolverKind;
    use jello::solver::jgs2::{load_or_build, SubspaceOrigin};
    let mut built = Scene::load(&scene_path)?.build()?;
    let backend = jello::gpu::Backend::Auto.resolve()?.backend;
    if let Some(p) = jello::runner::auto::resolve(&mut built.config, &built.model, backend) {
        println!("solver auto: {} ({})", p.solver, p.reason);
    }
    let cache = scene_path.parent().map(|d| d.join(".jello-cache"));
    if built.config.solver == SolverKind::Multilevel {
        use jello::solver::multilevel::{load_or_build_sms, SmsOrigin};
        let params = jello::runner::multilevel_params(&built.config);
        let t0 = std::time::Instant::now();
        let (b, origin, warnings) = load_or_build_sms(&built.model, &params, cache.as_deref())?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        match origin {
            SmsOrigin::Cache(p) => println!("up to date: {} (valid checksum and key)", p.display()),
            SmsOrigin::Built(p) => println!(
                "built {} in {:.3} s",
                p.map(|p| p.display().to_string())
                    .unwrap_or_else(|| "the SMS basis (not cached)".into()),
                t0.elapsed().as_secs_f64()
            ),
        }
        let st = &b.stats;
        let nv = b.n_vertices().max(1) as f64;
        println!(
            "{} handles, {} cubature samples (max fit error {:.1e}), N_cg = {}; phases: \
             geodesic {:.3} s, partition {:.3} s, weights {:.3} s, storage {:.3} s, cubature \
             {:.3} s; {:.0} + {:.0} bytes per vertex (basis + cubature)",
            b.n_handles(),
            b.cubature.n_samples(),
            b.cubature.max_fit_error(),
            b.n_cg.n_cg,
            st.geodesic_factor_s,
            st.partition_s,
            st.weights_s,
            st.storage_s,
            st.cubature_s,
            st.bytes as f64 / nv,
            st.cubature_bytes as f64 / nv
        );
        return Ok(());
    }
    if matches!(built.config.solver, SolverKind::Dot | SolverKind::LbfgsH) {
        use jello::solver::dot::{load_or_build_decomposition, DecompositionOrigin};
        let params = jello::runner::dot_params(&built.config);
        let t0 = std::time::Instant::now();
        let (d, origin, warnings) =
            load_or_build_decomposition(&built.model, params.subdomains, cache.as_deref())?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        match origin {
            DecompositionOrigin::Cache(p) => {
                println!("up to date: {} (valid checksum and key)", p.display())
            }
            DecompositionOrigin::Built(p) => println!(
                "built {} in {:.3} s",
                p.map(|p| p.display().to_string())
                    .unwrap_or_else(|| "the partition (not cached)".into()),
                t0.elapsed().as_secs_f64()
            ),
        }
        let st = d.stats();
        println!(
            "{} subdomains: {}–{} elements, {}–{} vertices each; {} interface vertices, \
             {:.3}× duplication",
            st.subdomains,
            st.elements_min,
            st.elements_max,
            st.vertices_min,
            st.vertices_max,
            st.interface_vertices,
            st.duplication
        );
        return Ok(());
    }
    // The step the run's subspace is built for (2h/3 under BDF2: see
    // `jello::runner::load_or_build_subspace`), so the run finds this artifact.
    let (sub, origin, warnings) = load_or_build(
        &built.model,
        built.model.integrator.steady_h(built.config.h),
        &built.config.subspace,
        cache.as_deref(),
    )?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let s = &sub.stats;
    match origin {
        SubspaceOrigin::Cache(p) => {
            println!("up to date: {} (valid checksum and key)", p.display())
        }
        SubspaceOrigin::Built(p) => println!(
            "built {} in {:.2} s: factor {:.2} s, basis {:.2} s, eigen {:.2} s, cubature {:.2} s",
            p.map(|p| p.display().to_string())
                .unwrap_or_else(|| "the subspace (not cached)".into()),
            s.total_s,
            s.factor_s,
            s.basis_s,
            s.eigen_s,
            s.cubature_s
        ),
    }
    println!(
        "{} free vertices, {} cluster-tree nodes, {} training modes, near field {:.1} vertices/vertex, \
         {:.2} far samples/vertex, {:.0} bytes/vertex (f32)",
        s.n_free, s.n_nodes, s.n_modes, s.mean_near, s.mean_samples, s.bytes_per_vertex
    );
    println!(
        "far-field relative error on the training poses: min {:.4} median {:.4} p90 {:.4} max {:.4} \
         ({:.0}% on target)",
        s.residual_min,
        s.residual_median,
        s.residual_p90,
        s.residual_max,
        100.0 * s.fraction_on_target
    );
    Ok(())
}

fn cmd_compare(
    scene_path: PathBuf,
    steps: Option<u64>,
    solver: Option<String>,
    variant: Option<String>,
    max_deviation: f64,
    json: Option<PathBuf>,
) -> Result<()> {
    if !(max_deviation.is_finite() && max_deviation > 0.0) {
        bail!("--max-deviation must be > 0");
    }
    let mut built = Scene::load(&scene_path)?.build()?;
    if let Some(s) = solver {
        built.config.set_solver(solver_name(&s)?);
    }
    // Both runs use the solver `auto` picks for the GPU, so the comparison is of backends.
    let gpu = jello::gpu::Backend::Gpu;
    if let Some(p) = jello::runner::auto::resolve(&mut built.config, &built.model, gpu) {
        built.config.auto_solver = false;
        println!("solver auto: {} ({})", p.solver, p.reason);
    }
    if let Some(v) = variant {
        built.config.variant = Some(variant_name(&v)?);
    }
    let n = match steps {
        Some(n) => usize::try_from(n).context("--steps")?,
        None => built.config.steps,
    };
    let report = jello::compare::compare(&scene_path, &built, n)?;
    println!(
        "GPU: {}   (deviations relative to the bounding-box diagonal {:.4} m)",
        report.adapter, report.diagonal
    );
    println!(
        "{:>5} {:>12} {:>12} {:>8} {:>8}",
        "step", "max dev", "mean dev", "it cpu", "it gpu"
    );
    let unconverged = |s: &jello::compare::CompareStep| match (s.converged_cpu, s.converged_gpu) {
        (true, true) => "",
        (false, true) => "  (cpu unconverged)",
        (true, false) => "  (gpu unconverged)",
        (false, false) => "  (both unconverged)",
    };
    for s in &report.steps {
        let flag = if s.max_deviation > max_deviation {
            "  > limit"
        } else {
            ""
        };
        println!(
            "{:>5} {:>12.3e} {:>12.3e} {:>8} {:>8}{flag}{}",
            s.step,
            s.max_deviation,
            s.mean_deviation,
            s.iterations_cpu,
            s.iterations_gpu,
            unconverged(s)
        );
    }
    if let Some(p) = json {
        let bytes = serde_json::to_vec_pretty(&report)?;
        jello::output::atomic_write(&p, &bytes)?;
    }
    let worst = report.worst();
    if worst > max_deviation {
        bail!("max deviation {worst:.3e} exceeds --max-deviation {max_deviation:.3e}");
    }
    println!("ok: worst step deviation {worst:.3e} ≤ {max_deviation:.1e}");
    Ok(())
}

/// Parses a `--variant` value.
fn variant_name(v: &str) -> Result<jello::solver::jgs2::Variant> {
    use jello::scene::SweepVariant;
    match SweepVariant::from_name(v) {
        Some(v) => Ok(v.into()),
        None => bail!("--variant: {}", SweepVariant::unknown(v)),
    }
}

/// Parses a `--solver` value: a solver or `auto` (any ASCII case, as in scene files).
fn solver_name(s: &str) -> Result<jello::scene::SolverChoice> {
    jello::scene::SolverChoice::parse(s).map_err(|e| anyhow::anyhow!("--solver: {e}"))
}
