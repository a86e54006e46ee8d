//! Per-kernel throughput of the GPU runtime on the adapter present and on the CPU twins, from
//! the same run: items/s, bytes moved per item (the kernel's own reads + writes, an estimate of
//! compulsory traffic), achieved GB/s and the GPU:CPU time ratio.
//!
//! Meshes: a generated box (~100k tets) and, when present, ../shared/meshes/armadillo_114k
//! (beside the repository root).
//! `cargo bench --bench kernels` (env JELLO_BENCH_REPS to change repetitions, WGPU_BACKEND to
//! pick the adapter). Software adapters (lavapipe/llvmpipe) are expected to be slower than the
//! CPU twins; the table reports what it measures.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::gpu::{
    Backend, Buf, Device, ElasticEvaluator, ElasticRest, ElemParams, EvalFlags, GpuMat3, GpuModel,
    GpuVec4, Kernel, Params, Plan, VertexCsr,
};
use jello::material::{ElementRest, Material, MaterialModel};
use jello::mesh::TetMesh;
use std::time::Instant;

struct Row {
    name: String,
    items: usize,
    bytes_per_item: f64,
    secs: [Option<f64>; 2], // [gpu, cpu] seconds per execution
}

/// Buffers for every kernel over one mesh, on one device.
struct Setup {
    dev: Device,
    nv: usize,
    ne: usize,
    x: Buf<GpuVec4>,
    xt: Buf<GpuVec4>,
    tets: Buf<[u32; 4]>,
    dm: Buf<GpuMat3>,
    ep: Buf<ElemParams>,
    f: Buf<GpuMat3>,
    u: Buf<GpuMat3>,
    s: Buf<GpuVec4>,
    v: Buf<GpuMat3>,
    energy: Buf<f32>,
    egrad: Buf<GpuVec4>,
    hess: Buf<f32>,
    offsets: Buf<u32>,
    ctets: Buf<u32>,
    clocal: Buf<u32>,
    vgrad: Buf<GpuVec4>,
    vdiag: Buf<GpuMat3>,
    mass: Buf<f32>,
    venergy: Buf<f32>,
    flat_a: Buf<f32>,
    flat_b: Buf<f32>,
    out: Buf<f32>,
}

fn setup(
    mut dev: Device,
    mesh: &TetMesh,
    rest: &[ElementRest<f64>],
    x: &[GpuVec4],
) -> jello::Result<Setup> {
    let nv = mesh.num_vertices();
    let ne = mesh.num_tets();
    let csr = VertexCsr::new(&mesh.tets, nv)?;
    let dm: Vec<GpuMat3> = rest
        .iter()
        .map(|r| {
            let d = r.dm_inv;
            GpuMat3::from_rows(
                [0, 1, 2].map(|i| [d[(i, 0)] as f32, d[(i, 1)] as f32, d[(i, 2)] as f32]),
            )
        })
        .collect();
    let ep: Vec<ElemParams> = rest
        .iter()
        .map(|r| ElemParams {
            mu: 1e5,
            lambda: 4e5,
            volume: r.volume as f32,
            model: GpuModel::StableNeoHookean as u32,
        })
        .collect();
    let flat: Vec<f32> = (0..4 * nv).map(|i| (i % 97) as f32 * 0.01).collect();
    let d = &mut dev;
    Ok(Setup {
        x: d.upload("x", x)?,
        xt: d.upload(
            "xt",
            &x.iter()
                .map(|p| [p[0] + 0.01, p[1], p[2], 0.0])
                .collect::<Vec<_>>(),
        )?,
        tets: d.upload("tets", &mesh.tets)?,
        dm: d.upload("dm", &dm)?,
        ep: d.upload("ep", &ep)?,
        f: d.alloc("f", ne)?,
        u: d.alloc("u", ne)?,
        s: d.alloc("s", ne)?,
        v: d.alloc("v", ne)?,
        energy: d.alloc("energy", ne)?,
        egrad: d.alloc("egrad", 4 * ne)?,
        hess: d.alloc("hess", 144 * ne)?,
        offsets: d.upload("offsets", &csr.offsets)?,
        ctets: d.upload("ctets", &csr.tets)?,
        clocal: d.upload("clocal", &csr.local)?,
        vgrad: d.alloc("vgrad", nv)?,
        vdiag: d.alloc("vdiag", nv)?,
        mass: d.upload("mass", &vec![1.0f32; nv])?,
        venergy: d.alloc("venergy", nv)?,
        flat_a: d.upload("a", &flat)?,
        flat_b: d.upload("b", &flat)?,
        out: d.alloc("out", 4)?,
        dev,
        nv,
        ne,
    })
}

/// Seconds per execution of `plan`: one warm-up, then `reps` submits of the plan repeated
/// `inner` times, timed to completion.
fn time_plan(dev: &mut Device, plan: &Plan, reps: usize) -> jello::Result<f64> {
    dev.submit(plan)?;
    dev.wait_idle()?;
    let t = Instant::now();
    for _ in 0..reps {
        dev.submit(plan)?;
    }
    dev.wait_idle()?;
    Ok(t.elapsed().as_secs_f64() / reps as f64)
}

type Case = (&'static str, fn(&Setup) -> (Plan, usize, f64));

fn cases() -> Vec<Case> {
    vec![
        ("deformation_gradient", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::DeformationGradient,
                &[s.x.id(), s.tets.id(), s.dm.id(), s.f.id()],
                Params::new(),
                s.ne as u32,
            );
            (p, s.ne, (64 + 16 + 48 + 48) as f64)
        }),
        ("svd3", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::Svd3,
                &[s.f.id(), s.u.id(), s.s.id(), s.v.id()],
                Params::new(),
                s.ne as u32,
            );
            (p, s.ne, (48 + 48 + 16 + 48) as f64)
        }),
        ("elastic E+grad", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::Elastic,
                &[
                    s.x.id(),
                    s.tets.id(),
                    s.dm.id(),
                    s.ep.id(),
                    s.energy.id(),
                    s.egrad.id(),
                    s.hess.id(),
                ],
                Params::new().u0(1),
                s.ne as u32,
            );
            (p, s.ne, (64 + 16 + 48 + 16 + 4 + 64) as f64)
        }),
        ("elastic E+grad+PSD hess", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::Elastic,
                &[
                    s.x.id(),
                    s.tets.id(),
                    s.dm.id(),
                    s.ep.id(),
                    s.energy.id(),
                    s.egrad.id(),
                    s.hess.id(),
                ],
                Params::new().u0(7),
                s.ne as u32,
            );
            (p, s.ne, (64 + 16 + 48 + 16 + 4 + 64 + 576) as f64)
        }),
        ("gather_gradient", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::GatherGradient,
                &[
                    s.egrad.id(),
                    s.offsets.id(),
                    s.ctets.id(),
                    s.clocal.id(),
                    s.vgrad.id(),
                ],
                Params::new(),
                s.nv as u32,
            );
            let deg = 4.0 * s.ne as f64 / s.nv as f64;
            (p, s.nv, 8.0 + deg * (4.0 + 4.0 + 16.0) + 16.0)
        }),
        ("gather_hessian_diag", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::GatherHessianDiag,
                &[
                    s.hess.id(),
                    s.offsets.id(),
                    s.ctets.id(),
                    s.clocal.id(),
                    s.vdiag.id(),
                ],
                Params::new(),
                s.nv as u32,
            );
            let deg = 4.0 * s.ne as f64 / s.nv as f64;
            (p, s.nv, 8.0 + deg * (4.0 + 4.0 + 36.0) + 48.0)
        }),
        ("inertia", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::Inertia,
                &[
                    s.x.id(),
                    s.xt.id(),
                    s.mass.id(),
                    s.vgrad.id(),
                    s.venergy.id(),
                ],
                Params::new().f0(3600.0),
                s.nv as u32,
            );
            (p, s.nv, (16 + 16 + 4 + 16 + 16 + 4) as f64)
        }),
        ("axpy (4n floats)", |s| {
            let mut p = Plan::new();
            p.dispatch(
                Kernel::Axpy,
                &[s.flat_a.id(), s.flat_b.id()],
                Params::new().f0(1e-3),
                4 * s.nv as u32,
            );
            (p, 4 * s.nv, 12.0)
        }),
        ("dot (4n floats, 2 passes)", |s| {
            let mut p = Plan::new();
            p.dot(&s.flat_a, &s.flat_b, 4 * s.nv as u32, &s.out, 0);
            (p, 4 * s.nv, 8.0)
        }),
        ("max_abs (4n floats)", |s| {
            let mut p = Plan::new();
            p.max_abs(&s.flat_a, 4 * s.nv as u32, &s.out, 1);
            (p, 4 * s.nv, 4.0)
        }),
    ]
}

fn bench_mesh(label: &str, mesh: &TetMesh, reps: usize) -> jello::Result<()> {
    let rest: Vec<ElementRest<f64>> = mesh
        .tets
        .iter()
        .map(|t| {
            ElementRest::new(&t.map(|i| mesh.positions[i as usize]))
                .ok_or_else(|| jello::JelloError::Invalid("degenerate tet".into()))
        })
        .collect::<jello::Result<_>>()?;
    // A mild stretch so the elastic kernels do real work.
    let x: Vec<GpuVec4> = mesh
        .positions
        .iter()
        .map(|p| [1.1 * p[0] as f32, p[1] as f32, 0.95 * p[2] as f32, 0.0])
        .collect();
    let mut devs: Vec<Option<Setup>> = Vec::new();
    let gpu = match Device::new(Backend::Gpu) {
        Ok(d) => Some(setup(d, mesh, &rest, &x)?),
        Err(e) => {
            out!("(no GPU adapter: {e})");
            None
        }
    };
    let gpu_name = gpu
        .as_ref()
        .map(|g| g.dev.info().to_string())
        .unwrap_or_else(|| "-".into());
    devs.push(gpu);
    devs.push(Some(setup(Device::cpu(), mesh, &rest, &x)?));
    let mut rows = Vec::new();
    for (name, make) in cases() {
        let mut row = Row {
            name: name.into(),
            items: 0,
            bytes_per_item: 0.0,
            secs: [None, None],
        };
        for (k, d) in devs.iter_mut().enumerate() {
            let Some(s) = d else { continue };
            let (plan, items, bpi) = make(s);
            row.items = items;
            row.bytes_per_item = bpi;
            row.secs[k] = Some(time_plan(&mut s.dev, &plan, reps)?);
        }
        rows.push(row);
    }
    // The whole evaluator (upload x and x − x̃, one submit, readback), as the Newton solver calls it.
    let masses = vec![1e-3; mesh.num_vertices()];
    let mats = vec![Material::new(MaterialModel::StableNeoHookean, 1e5, 4e5)?; mesh.num_tets()];
    let setup_e = ElasticRest {
        num_vertices: mesh.num_vertices(),
        tets: &mesh.tets,
        rest: &rest,
        materials: &mats,
        masses: &masses,
        origin: [0.0; 3],
    };
    let xf: Vec<f64> = x
        .iter()
        .flat_map(|p| [p[0] as f64, p[1] as f64, p[2] as f64])
        .collect();
    for (flags, name, bpi) in [
        (
            EvalFlags::default(),
            "evaluator E+grad (incl. transfers)",
            212.0,
        ),
        (
            EvalFlags::newton(),
            "evaluator newton (incl. 576 B/elem readback)",
            788.0,
        ),
    ] {
        let mut row = Row {
            name: name.into(),
            items: mesh.num_tets(),
            bytes_per_item: bpi,
            secs: [None, None],
        };
        for k in 0..2 {
            let dev = if k == 0 {
                match Device::new(Backend::Gpu) {
                    Ok(d) => d,
                    Err(_) => continue,
                }
            } else {
                Device::cpu()
            };
            let mut ev = ElasticEvaluator::new(dev, &setup_e)?;
            ev.evaluate(&xf, &xf, 1.0 / 60.0, flags)?;
            let t = Instant::now();
            for _ in 0..reps.min(5) {
                ev.evaluate(&xf, &xf, 1.0 / 60.0, flags)?;
            }
            row.secs[k] = Some(t.elapsed().as_secs_f64() / reps.min(5) as f64);
        }
        rows.push(row);
    }
    out!();
    out!(
        "## {label}: {} vertices, {} tets",
        mesh.num_vertices(),
        mesh.num_tets()
    );
    out!(
        "GPU = {gpu_name}; CPU = rayon, {} threads; {reps} reps per kernel",
        rayon::current_num_threads()
    );
    out!(
        "{:<44} {:>9} {:>7} | {:>9} {:>10} {:>8} | {:>9} {:>10} {:>8} | {:>8}",
        "kernel",
        "items",
        "B/item",
        "GPU ms",
        "GPU Mit/s",
        "GPU GB/s",
        "CPU ms",
        "CPU Mit/s",
        "CPU GB/s",
        "GPU:CPU"
    );
    let cell = |s: Option<f64>, items: usize, bpi: f64| match s {
        Some(t) => format!(
            "{:>9.3} {:>10.2} {:>8.2}",
            t * 1e3,
            items as f64 / t / 1e6,
            items as f64 * bpi / t / 1e9
        ),
        None => format!("{:>9} {:>10} {:>8}", "-", "-", "-"),
    };
    for r in &rows {
        let ratio = match r.secs {
            [Some(g), Some(c)] => format!("{:>8.2}", c / g),
            _ => format!("{:>8}", "-"),
        };
        out!(
            "{:<44} {:>9} {:>7.0} | {} | {} | {}",
            r.name,
            r.items,
            r.bytes_per_item,
            cell(r.secs[0], r.items, r.bytes_per_item),
            cell(r.secs[1], r.items, r.bytes_per_item),
            ratio
        );
    }
    out!("(GPU:CPU = CPU time / GPU time; > 1 means the GPU is faster)");
    Ok(())
}

fn main() {
    run();
    report::finish("kernels");
}

fn run() {
    let reps: usize = std::env::var("JELLO_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    // 26 × 26 × 25 Kuhn cells × 6 = 101,400 tets.
    let boxm = jello::mesh::box_grid([0.0; 3], [1.0; 3], [26, 26, 25]);
    if let Err(e) = bench_mesh("box 26×26×25", &boxm, reps) {
        eprintln!("box bench failed: {e}");
        std::process::exit(1);
    }
    let arm = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/meshes/armadillo_114k.node");
    let arm = arm.as_path();
    if arm.exists() {
        match jello::mesh::read_mesh(arm) {
            Ok(m) => {
                if let Err(e) = bench_mesh("armadillo_114k", &m.mesh, reps) {
                    eprintln!("armadillo bench failed: {e}");
                    std::process::exit(1);
                }
            }
            Err(e) => eprintln!("armadillo_114k: {e}"),
        }
    } else {
        out!("(armadillo_114k not present; skipped)");
    }
}
