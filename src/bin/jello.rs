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
        /// Where kernels run: auto (GPU when an adapter exists), cpu or gpu.
        #[arg(long, default_value = "cpu")]
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
    },
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
        let msg = e
            .chain()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(": ");
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run {
            scene,
            solver,
            backend,
            steps,
            out,
            stop,
            trace,
            obj,
        } => cmd_run(scene, solver, backend, steps, out, stop, trace, obj),
        Cmd::Precompute { scene } => cmd_precompute(scene),
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
    backend: String,
    steps: Option<usize>,
    out: PathBuf,
    stop: Option<String>,
    trace: bool,
    obj: bool,
) -> Result<()> {
    let scene = Scene::load(&scene_path)?;
    let mut built = scene.build()?;
    for w in &built.warnings {
        eprintln!("warning: {w}");
    }
    let c = &mut built.config;
    if let Some(s) = solver {
        let s = s.to_ascii_lowercase();
        if !jello::scene::SOLVERS.contains(&s.as_str()) {
            bail!(
                "--solver: unknown solver `{s}` (expected one of: {})",
                jello::scene::SOLVERS.join(", ")
            );
        }
        c.solver = s;
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
    match backend.as_str() {
        "cpu" | "auto" => {}
        "gpu" => bail!("--backend gpu: the GPU backend is not available in this build"),
        other => bail!("--backend: unknown backend `{other}` (expected auto, cpu or gpu)"),
    }
    let total = c.steps;
    let verts = built.model.num_vertices();
    let tets = built.model.mesh.num_tets();
    eprintln!(
        "jello: {} — {verts} vertices, {tets} tets, solver {}, h = {} s, {total} steps, backend cpu",
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
        "{} steps, {}/{} converged, {} iterations total, {:.1} ms total; wrote {}",
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
    use jello::solver::jgs2::{load_or_build, SubspaceOptions, SubspaceOrigin};
    let built = Scene::load(&scene_path)?.build()?;
    let cache = scene_path.parent().map(|d| d.join(".jello-cache"));
    let (sub, origin, warnings) = load_or_build(
        &built.model,
        built.config.h,
        &SubspaceOptions::default(),
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
        "{} free vertices, {} training modes, {:.2} cubature elements/vertex, {:.0} bytes/vertex (f32)",
        s.n_free, s.n_modes, s.mean_elements, s.bytes_per_vertex
    );
    println!(
        "cubature relative residual: min {:.3} median {:.3} p90 {:.3} max {:.3}",
        s.residual_min, s.residual_median, s.residual_p90, s.residual_max
    );
    Ok(())
}
