//! The `jello` command line: headless runs, mesh tools, adapter info.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use jello::scene::Scene;
use std::io::IsTerminal;
use std::path::PathBuf;

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
        /// Override the scene's solver (newton, jgs2, vbd).
        #[arg(long)]
        solver: Option<String>,
        /// JGS2/VBD sweep: jacobi (JGS2's default) or gs (coloured Gauss–Seidel, VBD's default).
        #[arg(long)]
        variant: Option<String>,
        /// Where element work runs: auto (GPU when an adapter exists, else CPU), cpu (f64
        /// reference) or gpu (wgpu kernels; error without an adapter).
        #[arg(long, default_value = "auto")]
        backend: String,
        /// Override the number of steps.
        #[arg(long)]
        steps: Option<usize>,
        /// Output directory.
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Stop rule: cn (characteristic norm) or dx (max position change).
        #[arg(long)]
        stop: Option<String>,
        /// Record per-iteration residual and energy in stats.json.
        #[arg(long)]
        trace: bool,
        /// Also write an .obj surface per frame.
        #[arg(long)]
        obj: bool,
        /// Also render a PNG per frame (fixed camera framing the scene).
        #[arg(long)]
        png: bool,
    },
    /// Run a scene on the f64 CPU path and on the GPU in lockstep and report per-step vertex
    /// deviations; exits non-zero when a step deviates more than --max-deviation.
    Compare {
        /// Scene file (TOML).
        scene: PathBuf,
        /// Steps to compare (default: the scene's).
        #[arg(long)]
        steps: Option<usize>,
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
    /// List GPU adapters with their limits and features.
    Info,
    /// Build (or verify) the JGS2 subspace artifact of a scene in SCENE_DIR/.jello-cache.
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

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
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

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run {
            scene,
            solver,
            variant,
            backend,
            steps,
            out,
            stop,
            trace,
            obj,
            png,
        } => cmd_run(
            scene, solver, variant, backend, steps, out, stop, trace, obj, png,
        ),
        Cmd::Precompute { scene } => cmd_precompute(scene),
        Cmd::Info => {
            println!("jello {}", env!("CARGO_PKG_VERSION"));
            println!("{}", jello::gpu::list_adapters());
            Ok(())
        }
        Cmd::Compare {
            scene,
            steps,
            solver,
            variant,
            max_deviation,
            json,
        } => cmd_compare(scene, steps, solver, variant, max_deviation, json),
        Cmd::Mesh { cmd } => match cmd {
            MeshCmd::Info { file } => {
                let loaded = jello::mesh::read_mesh(&file)?;
                for w in &loaded.warnings {
                    eprintln!("warning: {}: {w}", file.display());
                }
                println!("{}", jello::mesh::MeshInfo::new(&loaded.mesh));
                Ok(())
            }
            MeshCmd::Convert { input, output } => {
                let loaded = jello::mesh::convert(&input, &output)?;
                for w in &loaded.warnings {
                    eprintln!("warning: {}: {w}", input.display());
                }
                println!(
                    "wrote {} ({} vertices, {} tets)",
                    output.display(),
                    loaded.mesh.num_vertices(),
                    loaded.mesh.num_tets()
                );
                Ok(())
            }
        },
    }
}

#[allow(clippy::too_many_arguments)]
fn cmd_run(
    scene_path: PathBuf,
    solver: Option<String>,
    variant: Option<String>,
    backend: String,
    steps: Option<usize>,
    out: PathBuf,
    stop: Option<String>,
    trace: bool,
    obj: bool,
    png: bool,
) -> Result<()> {
    let scene = Scene::load(&scene_path)?;
    let mut built = scene.build()?;
    for w in &built.warnings {
        eprintln!("warning: {w}");
    }
    let c = &mut built.config;
    if let Some(s) = solver {
        c.solver = solver_name(&s)?;
    }
    if let Some(v) = variant {
        c.variant = Some(variant_name(&v)?);
    }
    if let Some(n) = steps {
        if n == 0 {
            bail!("--steps must be ≥ 1");
        }
        c.steps = n;
    }
    if let Some(s) = stop {
        c.stop = match (s.as_str(), c.stop) {
            ("cn", jello::solver::StopRule::Cn { eps }) => jello::solver::StopRule::Cn { eps },
            ("cn", _) => jello::solver::StopRule::Cn { eps: 1e-5 },
            ("dx", jello::solver::StopRule::Dx { tol }) => jello::solver::StopRule::Dx { tol },
            ("dx", _) => jello::solver::StopRule::Dx { tol: 1e-3 },
            _ => bail!("--stop: unknown rule `{s}` (expected cn or dx)"),
        };
    }
    if obj {
        c.output.obj = true;
    }
    if png {
        c.output.png = true;
    }
    let backend: jello::gpu::Backend = backend
        .parse()
        .map_err(|e| anyhow::anyhow!("--backend: {e}"))?;
    let total = c.steps;
    let verts = built.model.num_vertices();
    let tets = built.model.mesh.num_tets();
    eprintln!(
        "jello: {} — {verts} vertices, {tets} tets, solver {}, h = {} s, {total} steps",
        scene_path.display(),
        c.solver,
        c.h
    );
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(total as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let opts = jello::runner::RunOptions {
        out_dir: Some(out.clone()),
        trace,
        backend,
    };
    let (_sim, stats) = jello::runner::run(&scene_path, built, &opts, |step, r| {
        let line = format!(
            "step {step}/{total}: {} it, residual {:.2e}{}, {:.1} ms",
            r.iterations,
            r.residual,
            if r.converged { "" } else { " (NOT converged)" },
            r.wall_ms
        );
        match &bar {
            Some(b) => {
                b.set_position(step as u64);
                b.set_message(line);
            }
            None => eprintln!("{line}"),
        }
    })
    .with_context(|| format!("running {}", scene_path.display()))?;
    if let Some(b) = bar {
        b.finish();
    }
    println!(
        "backend {}{}: {} steps, {}/{} converged, {} iterations total, {:.1} ms total; wrote {}",
        stats.backend,
        stats
            .adapter
            .as_ref()
            .map(|a| format!(" ({a})"))
            .unwrap_or_default(),
        stats.steps.len(),
        stats.converged_steps,
        stats.steps.len(),
        stats.total_iterations,
        stats.total_wall_ms,
        out.display()
    );
    Ok(())
}

fn cmd_precompute(scene_path: PathBuf) -> Result<()> {
    use jello::solver::jgs2::{load_or_build, SubspaceOrigin};
    let built = Scene::load(&scene_path)?.build()?;
    let cache = scene_path.parent().map(|d| d.join(".jello-cache"));
    let (sub, origin, warnings) = load_or_build(
        &built.model,
        built.config.h,
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
            p.map(|p| p.display().to_string()).unwrap_or_default(),
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
    steps: Option<usize>,
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
        built.config.solver = solver_name(&s)?;
    }
    if let Some(v) = variant {
        built.config.variant = Some(variant_name(&v)?);
    }
    let n = steps.unwrap_or(built.config.steps);
    if n == 0 {
        bail!("--steps must be ≥ 1");
    }
    let report = jello::compare::compare(&scene_path, &built, n)?;
    println!(
        "GPU: {}   (deviations relative to the bounding-box diagonal {:.4} m)",
        report.adapter, report.diagonal
    );
    println!(
        "{:>5} {:>12} {:>12} {:>8} {:>8}",
        "step", "max dev", "mean dev", "it cpu", "it gpu"
    );
    for s in &report.steps {
        let flag = if s.max_deviation > max_deviation {
            "  > limit"
        } else {
            ""
        };
        println!(
            "{:>5} {:>12.3e} {:>12.3e} {:>8} {:>8}{flag}",
            s.step, s.max_deviation, s.mean_deviation, s.iterations_cpu, s.iterations_gpu
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

/// Validates a `--variant` value.
fn variant_name(v: &str) -> Result<String> {
    match v {
        "jacobi" | "gs" => Ok(v.to_owned()),
        _ => bail!("--variant: unknown variant `{v}` (expected jacobi or gs)"),
    }
}

/// Validates a `--solver` value.
fn solver_name(s: &str) -> Result<String> {
    let s = s.to_ascii_lowercase();
    if !jello::scene::SOLVERS.contains(&s.as_str()) {
        bail!(
            "--solver: unknown solver `{s}` (expected one of: {})",
            jello::scene::SOLVERS.join(", ")
        );
    }
    Ok(s)
}
