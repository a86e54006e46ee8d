//! The JGS2/VBD runtime on the device API: every kernel on the GPU against its CPU twin, the twins
//! against the f64 reference (`jello::solver::jgs2` local.rs / solver.rs, `jello::problem`), and
//! `DeviceJgs2` on the GPU and on the CPU twins against the f64 `Jgs2Solver`.
//!
//! Random inputs are fresh per run (seed printed; replay with `JELLO_TEST_SEED=<seed>`); outputs
//! are poisoned with NaN so unwritten entries show; comparisons are relative norms with the
//! tolerance justified next to each. A GPU test FAILS when no adapter is found unless
//! `JELLO_SKIP_GPU_TESTS=1`.
//!
//!   WGPU_BACKEND=vulkan cargo test --test gpu gpu_jgs2::   (Mesa lavapipe)
//!   WGPU_BACKEND=gl     cargo test --test gpu gpu_jgs2::   (Mesa llvmpipe via EGL)

use crate::common;

use glam::{Mat3, Vec3};
use jello::gpu::twins::{self, jgs2 as tw};
use jello::gpu::{
    Buf, Device, ElemParams, GpuContact, GpuLocalSystem, GpuMat3, GpuVec4, GpuVertexInfo, Kernel,
    Params, SurfaceCsr, SurfaceEdgeCsr, VertexCsr,
};
use jello::material::{Material, MaterialModel};
use jello::mesh::{ball, VertexTets};
use jello::problem::surface_contact::PairKind;
use jello::problem::{
    BarrierParams, Body, ElasticTerms, History, Integrator, Model, Obstacle, State, StepProblem,
};
use jello::solver::jgs2::{
    barrier_hessian, build_subspace, element_pass, hess_vec, jgs2_system, rest_frame_gradients,
    rotations, vbd_system, vertex_gradient, DeviceJgs2, ElementCache, Jgs2Params, Jgs2Solver,
    Safeguard, SubspaceOptions, Variant,
};
use jello::solver::{StepSolver, StopRule};
use nalgebra::{Matrix3, Vector3};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

// ---------------------------------------------------------------- harness

/// Serialises this file's GPU work on GL only (see `common::serial_on_gl`).
fn gpu_lock() -> Option<std::sync::MutexGuard<'static, ()>> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    common::serial_on_gl(&LOCK)
}

use common::assert_close;
use common::gpu_device as gpu;
use common::kernels::{nan_f, nan_m, nan_s, nan_v4, run_both, Data as D};

/// Compares output `k` of GPU vs CPU: elements (of `stride` words) the twin left poisoned must
/// be poisoned on the GPU too (nothing written outside the kernel's items); the written ones are
/// compared by relative norm. Panics when nothing was written.
fn compare_written(cpu: &[f32], gpu: &[f32], stride: usize, tol: f64, what: &str) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    // An element's first word is never padding: it tells whether the element was written.
    for (ec, eg) in cpu.chunks(stride).zip(gpu.chunks(stride)) {
        let wc = !ec[0].is_nan();
        let wg = !eg[0].is_nan();
        assert_eq!(wc, wg, "{what}: GPU and twin wrote different elements");
        if wc {
            a.extend_from_slice(eg);
            b.extend_from_slice(ec);
        }
    }
    assert!(!b.is_empty(), "{what}: nothing written");
    assert_close(&a, &b, tol, what);
}

fn rand_v4(rng: &mut ChaCha8Rng, n: usize, s: f32) -> Vec<GpuVec4> {
    (0..n)
        .map(|_| {
            [
                rng.random_range(-s..s),
                rng.random_range(-s..s),
                rng.random_range(-s..s),
                0.0,
            ]
        })
        .collect()
}

fn rand_rotation(rng: &mut ChaCha8Rng) -> Mat3 {
    let axis = Vec3::new(
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0f32),
    )
    .normalize_or(Vec3::X);
    Mat3::from_axis_angle(axis, rng.random_range(-3.0..3.0))
}

fn m3_f64(m: &Matrix3<f64>) -> GpuMat3 {
    GpuMat3::from_rows([0, 1, 2].map(|r| [m[(r, 0)] as f32, m[(r, 1)] as f32, m[(r, 2)] as f32]))
}

fn m3_words(m: &GpuMat3) -> [f32; 9] {
    let mut o = [0.0; 9];
    for r in 0..3 {
        for c in 0..3 {
            o[3 * r + c] = m.get(r, c);
        }
    }
    o
}

fn m3_words64(m: &Matrix3<f64>) -> [f64; 9] {
    let mut o = [0.0; 9];
    for r in 0..3 {
        for c in 0..3 {
            o[3 * r + c] = m[(r, c)];
        }
    }
    o
}

// ---------------------------------------------------------------- models

/// A beam [0, 0.5] × [−0.05, 0.05]² clamped at x = 0.
fn beam(model: MaterialModel, e: f64, cells: [usize; 3], obstacles: Vec<Obstacle>) -> Model {
    common::clamped_beam(model, e, 0.5, cells, obstacles)
}

/// A soft Neo-Hookean ball (r = 0.1 m) 1 cm above the ground, d̂ = 1e-3 × its bounding-box
/// diagonal (the scene default).
fn drop_ball() -> Model {
    let mesh = ball([0.0, 0.11, 0.0], 0.1, 4);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    Model::new(
        mesh,
        vec![Body {
            name: "ball".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![Material::from_young_poisson(MaterialModel::NeoHookean, 5e4, 0.4).unwrap(); nt],
        vec![1000.0; nt],
        [0.0, -9.81, 0.0],
        vec![],
        vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        BarrierParams {
            dhat: 1e-3 * 0.2 * 3f64.sqrt(),
            kappa: 1.0,
        },
    )
    .unwrap()
}

fn bbox_diagonal(m: &Model) -> f64 {
    let (lo, hi) = m.mesh.bounding_box().unwrap();
    (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt()
}

/// Per-element GPU rest data of a model.
fn rest_data(m: &Model) -> (Vec<GpuMat3>, Vec<ElemParams>) {
    jello::gpu::element_records(&m.rest, &m.materials).unwrap()
}

/// A deformed configuration of `m` (rest + smooth bend + noise), f64 and as vec4 f32.
fn deformed(m: &Model, rng: &mut ChaCha8Rng, noise: f64) -> (Vec<f64>, Vec<GpuVec4>) {
    let mut x = Vec::with_capacity(3 * m.num_vertices());
    for (v, p) in m.mesh.positions.iter().enumerate() {
        for k in 0..3 {
            let bend = if k == 1 { -0.2 * p[0] * p[0] } else { 0.0 };
            let n = if m.pinned[v] {
                0.0
            } else {
                rng.random_range(-noise..noise)
            };
            x.push(p[k] + bend + n);
        }
    }
    let v4 = x
        .chunks(3)
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect();
    (x, v4)
}

/// Element energies, gradients and projected Hessians of the f32 `elastic` twin at `x`.
fn elastic_cache(m: &Model, x: &[GpuVec4]) -> (Vec<f32>, Vec<GpuVec4>, Vec<f32>) {
    let ne = m.mesh.num_tets();
    let (dm, ep) = rest_data(m);
    let mut e = vec![0.0; ne];
    let mut g = vec![[0.0; 4]; 4 * ne];
    let mut h = vec![0.0; 144 * ne];
    let p =
        Params::new().u0(twins::ELASTIC_GRADIENT | twins::ELASTIC_HESSIAN | twins::ELASTIC_PROJECT);
    let p = Params { n: ne as u32, ..p };
    twins::elastic(&p, x, &m.mesh.tets, &dm, &ep, &mut e, &mut g, &mut h).unwrap();
    (e, g, h)
}

/// Random valid contact records (every kind; distances mostly inside d̂, all outside the
/// obstacles), `nc` per vertex.
fn random_contacts(rng: &mut ChaCha8Rng, nv: usize, nc: usize, dhat: f32) -> Vec<GpuContact> {
    let kind_bits = |k: u32| f32::from_bits(k);
    (0..nv * nc)
        .map(|i| {
            let d = dhat * rng.random_range(0.01..2.0f32);
            match i % 4 {
                0 => {
                    let n = Vec3::new(
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0f32),
                    )
                    .normalize_or(Vec3::Y);
                    GpuContact {
                        a: [n.x, n.y, n.z, d],
                        b: [0.0, 0.0, 0.0, kind_bits(GpuContact::HALF_SPACE)],
                    }
                }
                1 => {
                    let r = rng.random_range(0.05..0.3f32);
                    let n = Vec3::new(
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0f32),
                    )
                    .normalize_or(Vec3::Y);
                    let p = n * (r + d);
                    GpuContact {
                        a: [p.x, p.y, p.z, d],
                        b: [r, 0.0, 0.0, kind_bits(GpuContact::SPHERE)],
                    }
                }
                2 => {
                    // Outside a box of size 0.2: one to three coordinates beyond a face.
                    let mut ql = [0.0f32; 3];
                    let mut qh = [0.0f32; 3];
                    let out = rng.random_range(1..4usize);
                    for k in 0..3 {
                        let inside = rng.random_range(0.0..0.2f32);
                        if k < out {
                            let o = dhat * rng.random_range(0.01..1.5f32);
                            if rng.random_bool(0.5) {
                                ql[k] = -o;
                                qh[k] = 0.2 + o;
                            } else {
                                ql[k] = 0.2 + o;
                                qh[k] = -o;
                            }
                        } else {
                            ql[k] = inside;
                            qh[k] = 0.2 - inside;
                        }
                    }
                    GpuContact {
                        a: [ql[0], ql[1], ql[2], 0.0],
                        b: [qh[0], qh[1], qh[2], kind_bits(GpuContact::BOX)],
                    }
                }
                _ => GpuContact::none(),
            }
        })
        .collect()
}

fn vinfo(m: &Model) -> Vec<GpuVertexInfo> {
    (0..m.num_vertices())
        .map(|v| GpuVertexInfo {
            mass: m.mass[v] as f32,
            free: (!m.pinned[v]) as u32,
        })
        .collect()
}

// ---------------------------------------------------------------- GPU vs twin

// Tolerances GPU vs twin: the twins mirror the WGSL operation for operation in f32; what differs
// is the driver's rounding of sqrt/log/division and FMA contraction (a few ulp per operation).
// A few tens of operations per output give ~1e-6 relative; 1e-5 leaves a decade of margin.
// Kernels with an SVD (rotations) or long sums over a subspace (JGS2 systems) get more, said
// where they do.

#[test]
fn vertex_terms_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("vertex_terms_match_on_gpu");
    let nv = 700;
    let nc = 3;
    let dhat = 1e-3f32;
    let x = rand_v4(&mut rng, nv, 0.5);
    let xt = rand_v4(&mut rng, nv, 0.5);
    let xs = rand_v4(&mut rng, nv, 0.5);
    let vi: Vec<GpuVertexInfo> = (0..nv)
        .map(|_| GpuVertexInfo {
            mass: rng.random_range(0.01..1.0),
            free: rng.random_bool(0.8) as u32,
        })
        .collect();
    let contacts = random_contacts(&mut rng, nv, nc, dhat);
    let g = rand_v4(&mut rng, nv, 10.0);
    let data = [
        D::V(x),
        D::V(xt),
        D::V(xs),
        D::I(vi),
        D::C(contacts),
        D::V(g),
        nan_f(nv),
        nan_m(nv),
    ];
    // Inertia weight 1/ĥ² and the barrier's 1/h² differ (BDF2 at h = 0.01 s), so a kernel
    // that used one for the other would disagree with its twin.
    let p = Params {
        f0: 2.25e4,
        f1: 1.0,
        f2: dhat,
        f3: 1e4,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::Jgs2VertexTerms, &data, p, nv as u32);
    let Some(g) = gpu else { return };
    // The barrier's b, b', b'' take a log and divide by d ≥ 1e-2 d̂: a few ulp each; b''
    // (∝ d̂²/d²) amplifies the rounding of d twice. 1e-5 (3e-5 for the Hessians).
    assert_close(&g[5], &cpu[5], 1e-5, "vertex_terms gradient gpu vs cpu");
    assert_close(&g[6], &cpu[6], 1e-5, "vertex_terms energy gpu vs cpu");
    assert_close(
        &g[7],
        &cpu[7],
        3e-5,
        "vertex_terms barrier hessian gpu vs cpu",
    );
}

#[test]
fn rotations_and_tree_sums_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("rotations_and_tree_sums_match_on_gpu");
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [6, 2, 2], vec![]);
    let sub = build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let (nv, ne) = (m.num_vertices(), m.mesh.num_tets());
    let (_, ep) = rest_data(&m);
    let csr = VertexCsr::new(&m.mesh.tets, nv).unwrap();
    // Random deformation gradients: rotations × stretches, some near-degenerate.
    let f: Vec<GpuMat3> = (0..ne)
        .map(|_| {
            let s = Mat3::from_diagonal(Vec3::new(
                rng.random_range(0.5..1.5),
                rng.random_range(0.5..1.5),
                rng.random_range(0.05..1.5),
            ));
            GpuMat3::from_glam(rand_rotation(&mut rng) * s * rand_rotation(&mut rng))
        })
        .collect();
    let g = rand_v4(&mut rng, nv, 5.0);
    let nodes = sub.tree.len();
    for (keep, label) in [(0u32, "rotate"), (tw::ROTATION_KEEP, "keep")] {
        let rot0: Vec<GpuMat3> = (0..nv)
            .map(|_| GpuMat3::from_glam(rand_rotation(&mut rng)))
            .collect();
        let data = [
            D::M(f.clone()),
            D::E(ep.clone()),
            D::U(csr.offsets.clone()),
            D::U(csr.tets.clone()),
            D::V(g.clone()),
            if keep != 0 { D::M(rot0) } else { nan_m(nv) },
            nan_v4(nv + nodes),
        ];
        let (cpu, gpu) = run_both(
            Kernel::Jgs2Rotation,
            &data,
            Params::new().u0(keep),
            nv as u32,
        );
        let Some(gp) = gpu else { return };
        // Polar factors from the f32 SVD: U·Vᵀ is well-determined (unlike U, V) but inherits
        // the SVD's ~1e-6 rounding, more for the near-degenerate mean F: 1e-4.
        assert_close(
            &gp[5],
            &cpu[5],
            1e-4,
            &format!("rotation R ({label}) gpu vs cpu"),
        );
        assert_close(
            &gp[6][..4 * nv],
            &cpu[6][..4 * nv],
            1e-4,
            &format!("rest-frame gradient ({label}) gpu vs cpu"),
        );
        assert!(
            gp[6][4 * nv..].iter().all(|v| v.is_nan()),
            "node sums untouched"
        );
    }
    // Tree sums, level by level from the deepest, from random rest-frame gradients.
    let mut depth = vec![0usize; nodes];
    for c in 0..nodes {
        if sub.tree.parent[c] != u32::MAX {
            depth[c] = depth[sub.tree.parent[c] as usize] + 1;
        }
    }
    let tn: Vec<[u32; 4]> = (0..nodes)
        .map(|c| {
            let (l, r) = sub.tree.children[c].unwrap_or((tw::NO_CHILD, tw::NO_CHILD));
            [sub.tree.start[c], sub.tree.end[c], l, r]
        })
        .collect();
    let mut lists = vec![7u32; 3]; // an offset, to exercise u1
    let mut levels = Vec::new();
    for d in (0..=depth.iter().copied().max().unwrap()).rev() {
        let off = lists.len();
        lists.extend((0..nodes as u32).filter(|&c| depth[c as usize] == d));
        levels.push((off, lists.len() - off));
    }
    let mut frame: Vec<GpuVec4> = rand_v4(&mut rng, nv, 5.0);
    frame.extend(vec![[f32::NAN; 4]; tw::NODE_STRIDE * nodes]);
    let rest = rand_v4(&mut rng, nv, 0.5);
    let on = |dev: &mut Device| {
        let l: Buf<u32> = dev.upload("lists", &lists).unwrap();
        let n: Buf<[u32; 4]> = dev.upload("nodes", &tn).unwrap();
        let pm: Buf<u32> = dev.upload("perm", &sub.tree.perm).unwrap();
        let rs: Buf<GpuVec4> = dev.upload("rest", &rest).unwrap();
        let fr: Buf<GpuVec4> = dev.upload("frame", &frame).unwrap();
        let mut p = jello::gpu::Plan::new();
        for &(off, len) in &levels {
            p.dispatch(
                Kernel::Jgs2TreeSum,
                &[l.id(), n.id(), pm.id(), rs.id(), fr.id()],
                Params {
                    u0: nv as u32,
                    u1: off as u32,
                    ..Params::default()
                },
                len as u32,
            );
        }
        dev.submit(&p).unwrap();
        let out: Vec<f32> = bytemuck::cast_slice(&dev.read(&fr).unwrap()).to_vec();
        out
    };
    let cpu = on(&mut Device::cpu());
    // The twin's node sums and first moments against f64 sums over each node's members.
    let exact = |moment: Option<usize>| -> Vec<f32> {
        (0..nodes)
            .flat_map(|c| {
                let mut s = [0.0f64; 3];
                for &j in sub.tree.members(c) {
                    let w = moment.map_or(1.0, |q| rest[j as usize][q] as f64);
                    for k in 0..3 {
                        s[k] += w * frame[j as usize][k] as f64;
                    }
                }
                [s[0] as f32, s[1] as f32, s[2] as f32, 0.0]
            })
            .collect()
    };
    let part = |v: &[f32], q: usize| -> Vec<f32> {
        v[4 * nv..]
            .chunks(4 * tw::NODE_STRIDE)
            .flat_map(|e| e[4 * q..4 * q + 4].to_vec())
            .collect()
    };
    // f32 sums of ≤ nv terms of similar size: ~nv·ε worst case, far less in practice: 1e-5.
    assert_close(&part(&cpu, 0), &exact(None), 1e-5, "tree sums cpu vs f64");
    for q in 0..3 {
        // Products with random-sign offsets cancel more: 1e-4.
        assert_close(
            &part(&cpu, q + 1),
            &exact(Some(q)),
            1e-4,
            &format!("tree moments ({q}) cpu vs f64"),
        );
    }
    if let Some(mut d) = gpu() {
        let g = on(&mut d);
        // Same additions in the same order on both: bit-identical up to FMA-free adds: 1e-6.
        assert_close(&g, &cpu, 1e-6, "tree sums gpu vs cpu");
    }
}

/// Inputs of the system kernels for a random state of a small clamped beam with its subspace.
struct SystemCase {
    m: Model,
    blob: Vec<u32>,
    g: Vec<GpuVec4>,
    rot: Vec<GpuMat3>,
    frame: Vec<GpuVec4>,
    hess: Vec<f32>,
    free: Vec<u32>,
}

fn system_case(rng: &mut ChaCha8Rng) -> SystemCase {
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [6, 2, 2], vec![]);
    let sub = build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let blob = DeviceJgs2::pack_subspace(&m, &sub).unwrap();
    let nv = m.num_vertices();
    let (_, x) = deformed(&m, rng, 0.005);
    let (_, _, hess) = elastic_cache(&m, &x);
    let g: Vec<GpuVec4> = (0..nv)
        .map(|v| {
            if m.pinned[v] {
                [0.0; 4]
            } else {
                [
                    rng.random_range(-5.0..5.0),
                    rng.random_range(-5.0..5.0),
                    rng.random_range(-5.0..5.0),
                    0.0,
                ]
            }
        })
        .collect();
    let rot: Vec<GpuMat3> = (0..nv)
        .map(|_| {
            let axis = Vec3::new(
                rng.random_range(-1.0..1.0),
                1.0,
                rng.random_range(-1.0..1.0),
            );
            GpuMat3::from_glam(Mat3::from_axis_angle(
                axis.normalize(),
                rng.random_range(-0.3..0.3),
            ))
        })
        .collect();
    let mut frame: Vec<GpuVec4> = (0..nv)
        .map(|v| {
            let r = rot[v].to_glam();
            let gv = r.transpose() * Vec3::new(g[v][0], g[v][1], g[v][2]);
            [gv.x, gv.y, gv.z, 0.0]
        })
        .collect();
    // Node sums and first moments (rest offsets ~0.5 m).
    frame.extend(rand_v4(rng, tw::NODE_STRIDE * sub.tree.len(), 20.0));
    let free = (0..nv as u32).filter(|&v| !m.pinned[v as usize]).collect();
    SystemCase {
        m,
        blob,
        g,
        rot,
        frame,
        hess,
        free,
    }
}

#[test]
fn jgs2_and_vbd_systems_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("jgs2_and_vbd_systems_match_on_gpu");
    let c = system_case(&mut rng);
    let nv = c.m.num_vertices();
    // List every other free vertex, after an offset: unlisted vertices must stay untouched.
    let mut lists = vec![0u32; 5];
    lists.extend(c.free.iter().copied().step_by(2));
    let n = (lists.len() - 5) as u32;
    let p = Params {
        u0: nv as u32,
        u1: 5,
        f0: 1e4,
        ..Params::default()
    };
    let data = [
        D::U(lists.clone()),
        D::U(c.blob.clone()),
        D::V(c.g.clone()),
        D::M(c.rot.clone()),
        D::V(c.frame.clone()),
        D::F(c.hess.clone()),
        nan_s(nv),
    ];
    let (cpu, gpu) = run_both(Kernel::Jgs2System, &data, p, n);
    if let Some(g) = &gpu {
        // A sums ~20 incident elements' UᵀKU (16 block triple products each) and r ~70 near/far
        // blocks: a few hundred f32 operations per entry, partly cancelling in r: 1e-5.
        compare_written(&cpu[6], &g[6], 32, 1e-5, "jgs2_system gpu vs cpu");
    }
    let vt = VertexTets::new(&c.m.mesh);
    let packed = vt.packed();
    let data = [
        D::U(lists),
        D::I(vinfo(&c.m)),
        D::V(c.g.clone()),
        D::F(c.hess.clone()),
        D::U(vt.offsets.clone()),
        D::U(packed),
        nan_s(nv),
    ];
    let p = Params {
        u1: 5,
        f0: 1e4,
        ..Params::default()
    };
    let (cpu2, gpu2) = run_both(Kernel::VbdSystem, &data, p, n);
    // The VBD system is also the JGS2 kernel's fallback: same formula, summed in the same order.
    assert_close(
        &cpu2[6]
            .chunks(32)
            .filter(|e| !e[0].is_nan())
            .flat_map(|e| e[..16].to_vec())
            .collect::<Vec<_>>(),
        &cpu[6]
            .chunks(32)
            .filter(|e| !e[0].is_nan())
            .flat_map(|e| e[16..32].to_vec())
            .collect::<Vec<_>>(),
        1e-6,
        "vbd_system twin vs jgs2_system fallback twin",
    );
    if let Some(g) = gpu2 {
        compare_written(&cpu2[6], &g[6], 32, 1e-5, "vbd_system gpu vs cpu");
    }
}

#[test]
fn vertex_solve_matches_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("vertex_solve_matches_on_gpu");
    let nv = 600;
    let nc = 2;
    // SPD systems, every 7th primary indefinite (fallback path), every 19th both indefinite.
    let spd = |rng: &mut ChaCha8Rng| {
        let b = Mat3::from_cols_array(&std::array::from_fn(|_| rng.random_range(-1.0..1.0f32)));
        b * b.transpose() + Mat3::IDENTITY * rng.random_range(0.1..2.0) * 100.0
    };
    let sys: Vec<GpuLocalSystem> = (0..nv)
        .map(|v| {
            let mut a = spd(&mut rng);
            let mut af = spd(&mut rng);
            if v % 7 == 0 {
                a.x_axis.x = -1.0;
            }
            if v % 19 == 0 {
                af.y_axis.y = -5.0;
                a.y_axis.y = -5.0;
            }
            let r = |rng: &mut ChaCha8Rng| {
                [
                    rng.random_range(-1.0..1.0),
                    rng.random_range(-1.0..1.0),
                    rng.random_range(-1.0..1.0),
                    0.0,
                ]
            };
            GpuLocalSystem {
                a: GpuMat3::from_glam(a),
                r: r(&mut rng),
                a_fallback: GpuMat3::from_glam(af),
                r_fallback: r(&mut rng),
            }
        })
        .collect();
    let hbar: Vec<GpuMat3> = (0..nv)
        .map(|v| {
            let n = Vec3::new(0.0, 1.0, 0.0);
            GpuMat3::from_glam(
                Mat3::from_cols(n * n.x, n * n.y, n * n.z) * if v % 3 == 0 { 50.0 } else { 0.0 },
            )
        })
        .collect();
    // Distances ~ the step size so the filter is active for many vertices.
    let contacts = random_contacts(&mut rng, nv, nc, 0.01);
    let mut lists = vec![3u32, 1];
    lists.extend((0..nv as u32).filter(|v| v % 5 != 1));
    let n = (lists.len() - 2) as u32;
    for (mode, slot) in [
        (tw::SOLVE_WITH_FALLBACK, 0u32),
        (tw::SOLVE_PRIMARY, 1),
        (tw::SOLVE_FALLBACK, 2),
    ] {
        // No surface triangles here (the surface filter: tests/gpu/gpu_surface.rs).
        let surface = SurfaceCsr::empty(nv);
        let data = [
            D::U(lists.clone()),
            D::S(sys.clone()),
            D::M(hbar.clone()),
            D::C(contacts.clone()),
            D::U(surface.vfaces),
            D::T(surface.tris),
            nan_v4(3 * nv),
        ];
        let p = Params {
            u0: mode | (slot << 4),
            u1: 2,
            ..Params::default()
        };
        let (cpu, gpu) = run_both(Kernel::VertexSolve, &data, p, n);
        let s = slot as usize;
        // Only the slot's listed vertices are written.
        for v in 0..3 * nv {
            let listed = v / nv == s && (v % nv) % 5 != 1;
            assert_eq!(
                !cpu[6][4 * v].is_nan(),
                listed,
                "mode {mode}: twin wrote entry {v} wrongly"
            );
        }
        // The twin's solution against an f64 solve of the same systems (same fallback logic).
        for &v in &lists[2..] {
            let v = v as usize;
            let sv = &sys[v];
            let h = hbar[v].to_glam();
            let solve = |a: Mat3, r: [f32; 4]| -> Option<Vector3<f64>> {
                let a = a + h;
                let am = Matrix3::from_fn(|i, j| a.col(j)[i] as f64);
                am.cholesky()
                    .map(|c| -c.solve(&Vector3::new(r[0] as f64, r[1] as f64, r[2] as f64)))
            };
            let mut d = None;
            if mode != tw::SOLVE_FALLBACK {
                d = solve(sv.a.to_glam(), sv.r);
            }
            if d.is_none() && mode != tw::SOLVE_PRIMARY {
                d = solve(sv.a_fallback.to_glam(), sv.r_fallback);
            }
            let d = d.unwrap_or_else(Vector3::zeros);
            let d32 = Vec3::new(d.x as f32, d.y as f32, d.z as f32);
            let alpha = tw::contact_step_bound(&contacts[v * nc..v * nc + nc], d32) as f64;
            let want = d * alpha;
            let got = &cpu[6][4 * (s * nv + v)..4 * (s * nv + v) + 3];
            let err = (0..3)
                .map(|k| (got[k] as f64 - want[k]).powi(2))
                .sum::<f64>()
                .sqrt();
            // f32 Cholesky of matrices with condition ≲ 1e2: ~1e-5 relative.
            assert!(
                err <= 1e-4 * want.norm() + 1e-9,
                "mode {mode}, vertex {v}: twin {got:?} vs f64 {want:?}"
            );
        }
        if let Some(g) = gpu {
            compare_written(
                &cpu[6],
                &g[6],
                4,
                1e-5,
                &format!("vertex_solve mode {mode} gpu vs cpu"),
            );
        }
    }
}

#[test]
fn hess_vec_and_dots_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("hess_vec_and_dots_match_on_gpu");
    // 2500 vertices: three reduction blocks of 1024.
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [24, 9, 9], vec![]);
    let nv = m.num_vertices();
    assert!(nv > 2048);
    let (_, x) = deformed(&m, &mut rng, 0.002);
    let (_, _, hess) = elastic_cache(&m, &x);
    let vt = VertexTets::new(&m.mesh);
    let hbar: Vec<GpuMat3> = (0..nv)
        .map(|v| {
            GpuMat3::from_glam(if v % 4 == 0 {
                Mat3::from_diagonal(Vec3::new(0.0, rng.random_range(0.0..1e5), 0.0))
            } else {
                Mat3::ZERO
            })
        })
        .collect();
    let mut dirs = rand_v4(&mut rng, 3 * nv, 1e-3);
    for (v, d) in dirs.iter_mut().enumerate() {
        if m.pinned[v % nv] {
            *d = [0.0; 4];
        }
    }
    let g: Vec<GpuVec4> = (0..nv)
        .map(|v| {
            if m.pinned[v] {
                [0.0; 4]
            } else {
                [
                    rng.random_range(-1.0..1.0),
                    rng.random_range(-1.0..1.0),
                    rng.random_range(-1.0..1.0),
                    0.0,
                ]
            }
        })
        .collect();
    for nd in [1u32, 3] {
        let data = [
            D::F(hess.clone()),
            D::T(m.mesh.tets.clone()),
            D::U(vt.offsets.clone()),
            D::U(vt.packed()),
            D::I(vinfo(&m)),
            D::M(hbar.clone()),
            D::V(dirs.clone()),
            nan_v4(3 * nv),
        ];
        let p = Params {
            u0: nd,
            f0: 1e4,
            ..Params::default()
        };
        let (cpu, gpu) = run_both(Kernel::HessVec, &data, p, nv as u32);
        let used = 4 * nd as usize * nv;
        assert!(
            cpu[7][used..].iter().all(|v| v.is_nan()),
            "only {nd} products written"
        );
        if let Some(gp) = &gpu {
            // ~25 incident elements × 4 blocks of 3×3 products per vertex, with cancellation
            // (K's rows sum to ~0 against smooth vectors; random vectors cancel less): 1e-5.
            assert_close(
                &gp[7][..used],
                &cpu[7][..used],
                1e-5,
                &format!("hess_vec ({nd}) gpu vs cpu"),
            );
        }
        if nd == 3 {
            let hd: Vec<GpuVec4> = bytemuck::cast_slice(&cpu[7]).to_vec();
            // Residual weights 1/c_v of the characteristic norm (here of order 1e-6 1/Pa).
            let w: Vec<f32> = (0..nv).map(|_| rng.random_range(0.5e-6..2e-6)).collect();
            let data = [
                D::V(g.clone()),
                D::V(dirs.clone()),
                D::V(hd.clone()),
                D::F(w.clone()),
                nan_f(4 + 16 * 3),
            ];
            let (dc, dg) = run_both(
                Kernel::Jgs2Dots,
                &data,
                Params {
                    u0: 3,
                    u1: 4,
                    ..Params::default()
                },
                nv as u32,
            );
            // The twin's block partials against f64 sums of the same f32 products per block.
            let mut exact = vec![0.0f32; 48];
            for blk in 0..3 {
                let mut acc = [0.0f64; 13];
                for i in blk * 1024..((blk + 1) * 1024).min(nv) {
                    let gi = &g[i];
                    let d3 = |a: &GpuVec4, b: &GpuVec4| {
                        (0..3).map(|k| a[k] as f64 * b[k] as f64).sum::<f64>()
                    };
                    acc[0] += d3(gi, gi) * (w[i] as f64).powi(2);
                    for pp in 0..3 {
                        acc[1 + pp] += d3(gi, &dirs[pp * nv + i]);
                        for q in 0..3 {
                            acc[4 + 3 * pp + q] += d3(&dirs[pp * nv + i], &hd[q * nv + i]);
                        }
                    }
                }
                for j in 0..13 {
                    exact[16 * blk + j] = acc[j] as f32;
                }
            }
            let out = &dc[4];
            assert!(
                out[..4].iter().all(|v| v.is_nan()),
                "dots respect the offset"
            );
            // Tree sums of 1024 f32 products: ~10 roundings of the block's magnitude; the
            // cross terms g·d, d·Hd cancel (random signs) so compare by norm, the weighted
            // ‖g‖² (other units) on its own: 1e-5.
            let sel = |v: &[f32], first: bool| -> Vec<f32> {
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| (i % 16 == 0) == first)
                    .map(|(_, &x)| x)
                    .collect()
            };
            assert_close(
                &sel(&out[4..], true),
                &sel(&exact, true),
                1e-5,
                "weighted |g|² cpu vs f64",
            );
            assert_close(
                &sel(&out[4..], false),
                &sel(&exact, false),
                1e-5,
                "dots cpu vs f64",
            );
            if let Some(gd) = dg {
                assert_close(&gd[4][4..], &out[4..], 1e-6, "dots gpu vs cpu");
            }
            // The cut safeguard's plain trial (`JGS2_DOTS_GD_ONLY`): ‖g‖² and g·d_0 as above
            // from a NaN Hessian buffer, which must not be read (the d·hd entries are 0).
            let gd_only = [
                D::V(g.clone()),
                D::V(dirs.clone()),
                nan_v4(3 * nv),
                D::F(w.clone()),
                nan_f(4 + 16 * 3),
            ];
            let (pc, pg) = run_both(
                Kernel::Jgs2Dots,
                &gd_only,
                Params {
                    u0: 1 | tw::JGS2_DOTS_GD_ONLY,
                    u1: 4,
                    ..Params::default()
                },
                nv as u32,
            );
            for (dname, o) in
                std::iter::once(("cpu", &pc[4])).chain(pg.as_ref().map(|g| ("gpu", &g[4])))
            {
                for blk in 0..3 {
                    let b = &o[4 + 16 * blk..4 + 16 * blk + 16];
                    assert!(
                        b[2..].iter().all(|&v| v == 0.0),
                        "{dname} block {blk}: only ‖g‖² and g·d_0 with GD_ONLY: {b:?}"
                    );
                    for j in 0..2 {
                        let (v, e) = (b[j], out[4 + 16 * blk + j]);
                        assert!(
                            (v - e).abs() <= 1e-5 * e.abs().max(1e-30),
                            "{dname} block {blk} entry {j}: {v} vs {e} (all directions)"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn combine_trial_apply_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("combine_trial_apply_match_on_gpu");
    let nv = 900;
    let nc = 2;
    let dirs = rand_v4(&mut rng, 3 * nv, 0.01);
    let contacts = random_contacts(&mut rng, nv, nc, 0.01);
    let x = rand_v4(&mut rng, nv, 0.5);
    let coef = Params {
        f0: 0.9,
        f1: -0.3,
        f2: 0.4,
        ..Params::default()
    };
    let data = [
        D::V(dirs.clone()),
        D::C(contacts.clone()),
        nan_v4(nv),
        nan_f(nv),
    ];
    let (cpu, gpu) = run_both(Kernel::Jgs2Combine, &data, coef, nv as u32);
    // The bound is the f64 reference's per-vertex obstacle filter on the same records.
    let bound_max = cpu[3].iter().fold(0.0f32, |m, &v| m.max(v));
    assert!(
        bound_max > 1.0 && bound_max.is_finite(),
        "some vertex is limited"
    );
    if let Some(g) = &gpu {
        assert_close(&g[2], &cpu[2], 1e-6, "combined step gpu vs cpu");
        // 1/α: α from a division and a sqrt per obstacle, through the sphere's quadratic
        // time of impact, whose cancellation at grazing directions amplifies the last bits.
        // Bit-identical on lavapipe (Vulkan: correctly rounded division and sqrt); GLSL's are
        // within a few ULP, and on llvmpipe-GL the relative norm measured ≤ 9.2e-5 over seeds
        // 1–200 (1.07e-5 failed the former 1e-5 in CI). A wrong bound formula is O(1).
        assert_close(&g[3], &cpu[3], 3e-4, "step bounds gpu vs cpu");
    }
    let step: Vec<GpuVec4> = bytemuck::cast_slice(&cpu[2]).to_vec();
    let mut scal = vec![0.0f32; 9];
    scal[6] = bound_max;
    let data = [
        D::V(x.clone()),
        D::V(step),
        D::F(scal),
        D::C(contacts.clone()),
        nan_v4(nv),
        D::C(vec![
            GpuContact {
                a: [f32::NAN; 4],
                b: [f32::NAN; 4]
            };
            nv * nc
        ]),
        D::V(dirs.clone()),
        nan_f(nv),
    ];
    let p = Params {
        u1: 6,
        f0: 0.5,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::Jgs2Trial, &data, p, nv as u32);
    // The trial's new distances against f64 distances of the moved points (half-spaces).
    let a = 0.5 / bound_max;
    for v in 0..nv {
        let c = &contacts[v * nc];
        if c.kind() == GpuContact::HALF_SPACE {
            let s = &cpu[1][4 * v..4 * v + 3];
            let want = c.a[3] as f64
                + (0..3)
                    .map(|k| c.a[k] as f64 * (s[k] * a) as f64)
                    .sum::<f64>();
            let got = cpu[5][8 * v * nc + 3] as f64;
            assert!(
                (got - want).abs() <= 1e-6 * want.abs() + 1e-9,
                "vertex {v}: d {got} vs {want}"
            );
            assert!(got > 0.0, "the bounded step keeps vertex {v} outside");
        }
    }
    if let Some(g) = &gpu {
        for (k, what) in [
            (4, "trial x"),
            (5, "trial contacts"),
            (6, "trial dirs"),
            (7, "trial moves"),
        ] {
            assert_close(&g[k], &cpu[k], 1e-6, &format!("{what} gpu vs cpu"));
        }
    }
    // The trial's fine parts (positions kept as the step start's f32 value + a fine part):
    // the fine parts plus the trial's move from its dirs slot 2.
    let fine = rand_v4(&mut rng, nv, 0.01);
    let moved: Vec<GpuVec4> = bytemuck::cast_slice(&cpu[6]).to_vec();
    let data = [D::V(fine.clone()), D::V(moved.clone()), nan_v4(nv)];
    let (cpu, gpu) = run_both(Kernel::Jgs2TrialFine, &data, Params::default(), nv as u32);
    for v in 0..nv {
        for k in 0..3 {
            let want = fine[v][k] + moved[2 * nv + v][k];
            assert_eq!(cpu[2][4 * v + k], want, "trial_fine vertex {v}[{k}]");
        }
        assert_eq!(cpu[2][4 * v + 3], 0.0, "trial_fine vertex {v}: w");
    }
    if let Some(g) = &gpu {
        // One correctly rounded f32 addition per component: identical on any adapter.
        assert_close(&g[2], &cpu[2], 0.0, "trial_fine gpu vs cpu");
    }
    // Apply to a list: without fine parts (u0 = 0, not read), then with (u0 = 1: they take
    // the same move).
    let mut lists = vec![9u32];
    lists.extend((0..nv as u32).filter(|v| v % 3 == 0));
    let n = (lists.len() - 1) as u32;
    for with_fine in [false, true] {
        let data = [
            D::U(lists.clone()),
            D::V(dirs[..nv].to_vec()),
            D::V(x.clone()),
            D::C(contacts.clone()),
            nan_f(nv),
            if with_fine {
                D::V(fine.clone())
            } else {
                nan_v4(1)
            },
        ];
        let p = Params {
            u0: with_fine as u32,
            u1: 1,
            f0: -0.25,
            f1: 0.75,
            ..Params::default()
        };
        let (cpu, gpu) = run_both(Kernel::Jgs2Apply, &data, p, n);
        if with_fine {
            for v in 0..nv {
                let listed = lists[1..].contains(&(v as u32));
                for k in 0..3 {
                    let moved = cpu[2][4 * v + k] - x[v][k];
                    let want = if listed {
                        fine[v][k] + -0.25 * dirs[v][k]
                    } else {
                        fine[v][k]
                    };
                    assert_eq!(cpu[5][4 * v + k], want, "apply fine vertex {v}[{k}]");
                    if !listed {
                        assert_eq!(moved, 0.0, "apply: unlisted vertex {v} moved");
                    }
                }
            }
        }
        if let Some(g) = &gpu {
            assert_close(&g[2], &cpu[2], 1e-6, "apply x gpu vs cpu");
            if with_fine {
                assert_close(&g[5], &cpu[5], 1e-6, "apply fine gpu vs cpu");
            }
            assert_close(&g[3], &cpu[3], 1e-6, "apply contacts gpu vs cpu");
            compare_written(&cpu[4], &g[4], 1, 1e-6, "apply moves gpu vs cpu");
        }
    }
}

#[test]
fn elastic_list_matches_elastic_and_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("elastic_list_matches_elastic_and_gpu");
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [5, 2, 2], vec![]);
    let ne = m.mesh.num_tets();
    let (_, x) = deformed(&m, &mut rng, 0.004);
    let (e, g, h) = elastic_cache(&m, &x);
    let (dm, ep) = rest_data(&m);
    // The whole Hessian, then (ELASTIC_DIAGONAL, plain VBD's pass) its four diagonal blocks only.
    for diagonal in [false, true] {
        let mut lists = vec![0u32; 2];
        let listed: Vec<u32> = (0..ne as u32).filter(|_| rng.random_bool(0.5)).collect();
        lists.extend(&listed);
        let data = [
            D::V(x.clone()),
            D::T(m.mesh.tets.clone()),
            D::M(dm.clone()),
            D::E(ep.clone()),
            D::U(lists),
            nan_f(ne),
            nan_v4(4 * ne),
            nan_f(144 * ne),
        ];
        let p = Params {
            u0: twins::ELASTIC_GRADIENT
                | twins::ELASTIC_HESSIAN
                | twins::ELASTIC_PROJECT
                | if diagonal { twins::ELASTIC_DIAGONAL } else { 0 },
            u1: 2,
            ..Params::default()
        };
        // Entry k of an element's 12 × 12 block is in a diagonal 3×3 block.
        let in_diag = |k: usize| (k / 12) / 3 == (k % 12) / 3;
        let (cpu, gpu) = run_both(Kernel::ElasticList, &data, p, listed.len() as u32);
        // The listed elements equal the `elastic` twin's results (the same function): the whole
        // Hessian, or its diagonal blocks with the rest left as it was; the others stay poisoned.
        for t in 0..ne {
            let on = listed.contains(&(t as u32));
            assert_eq!(!cpu[5][t].is_nan(), on, "element {t}");
            if on {
                assert_eq!(cpu[5][t], e[t]);
                assert_eq!(
                    &cpu[6][16 * t..16 * t + 16],
                    bytemuck::cast_slice::<GpuVec4, f32>(&g[4 * t..4 * t + 4])
                );
                for k in 0..144 {
                    let (c, f) = (cpu[7][144 * t + k], h[144 * t + k]);
                    if diagonal && !in_diag(k) {
                        assert!(
                            c.is_nan(),
                            "element {t}, entry {k}: written off the diagonal"
                        );
                    } else {
                        assert_eq!(c, f, "element {t}, entry {k} (diagonal only: {diagonal})");
                    }
                }
            }
        }
        if let Some(gp) = gpu {
            // Tolerances of tests/gpu/gpu_kernels.rs `elastic_matches_twin_on_gpu` (same
            // formulas).
            compare_written(&cpu[5], &gp[5], 1, 1e-5, "elastic_list energy gpu vs cpu");
            compare_written(
                &cpu[6],
                &gp[6],
                16,
                2e-5,
                "elastic_list gradient gpu vs cpu",
            );
            if diagonal {
                // The GPU leaves the same entries untouched, and writes the diagonal blocks.
                let pick = |v: &[f32]| -> Vec<f32> {
                    listed
                        .iter()
                        .flat_map(|&t| (0..144).filter(|&k| in_diag(k)).map(move |k| (t, k)))
                        .map(|(t, k)| v[144 * t as usize + k])
                        .collect()
                };
                for t in 0..ne {
                    for k in (0..144).filter(|&k| !in_diag(k)) {
                        assert!(gp[7][144 * t + k].is_nan(), "gpu element {t}, entry {k}");
                    }
                }
                assert_close(
                    &pick(&gp[7]),
                    &pick(&cpu[7]),
                    1e-4,
                    "elastic_list diagonal blocks gpu vs cpu",
                );
            } else {
                compare_written(
                    &cpu[7],
                    &gp[7],
                    144,
                    1e-4,
                    "elastic_list hessian gpu vs cpu",
                );
            }
        }
    }
}

// ---------------------------------------------------------------- twins vs the f64 reference

/// A clamped beam between three obstacles (ground below, a box at the tip, a sphere above),
/// its step problem, and a deformed iterate with vertices inside d̂ of each obstacle.
struct RefCase {
    m: Model,
    x: Vec<f64>,
    cache: ElementCache,
    vt: VertexTets,
}

fn ref_case(rng: &mut ChaCha8Rng) -> RefCase {
    let dhat = 1e-3;
    // A floor under the beam (a half-space), a box wall at its end (both on vertices: the
    // box's corners and edges are far from the beam) and a sphere over it (on the surface
    // triangles).
    let obstacles = vec![
        Obstacle::half_space([0.0, 1.0, 0.0], -0.0505),
        Obstacle::Box {
            min: [0.5006, -0.2, -0.2],
            max: [0.6, 0.2, 0.2],
        },
        Obstacle::Sphere {
            center: [0.25, 0.1506, 0.0],
            radius: 0.1,
        },
    ];
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [6, 2, 2], obstacles);
    let _ = dhat;
    // Small noise only, so the vertices near the obstacles stay outside and within reach.
    let mut x: Vec<f64> = m.mesh.positions.iter().flatten().copied().collect();
    for (k, v) in x.iter_mut().enumerate() {
        if !m.pinned[k / 3] {
            *v += rng.random_range(-2e-4..2e-4);
        }
    }
    let mut cache = ElementCache::default();
    element_pass(&m, &x, &mut cache, None);
    let vt = VertexTets::new(&m.mesh);
    RefCase { m, x, cache, vt }
}

fn state_of(m: &Model, rng: &mut ChaCha8Rng) -> State {
    let mut st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    for (k, v) in st.v.iter_mut().enumerate() {
        if !m.pinned[k / 3] {
            *v = rng.random_range(-0.3..0.3);
        }
    }
    st
}

fn contacts_at(m: &Model, x: &[f64]) -> Vec<GpuContact> {
    (0..m.num_vertices())
        .flat_map(|v| {
            m.obstacles
                .iter()
                .map(move |o| GpuContact::at(o, [x[3 * v], x[3 * v + 1], x[3 * v + 2]]))
        })
        .collect()
}

#[test]
fn vertex_terms_twin_matches_f64_reference() {
    let mut rng = common::rng("vertex_terms_twin_matches_f64_reference");
    let c = ref_case(&mut rng);
    // A BDF2 step (with history), whose inertia weight 1/ĥ² = 9/(4h²) differs from the
    // barrier's 1/h²: the kernels take them as f0 and f3, and mixing them up fails here.
    let bdf2 = c.m.clone().with_integrator(Integrator::Bdf2);
    let m = &bdf2;
    let nv = m.num_vertices();
    let mut st = state_of(m, &mut rng);
    st.history = Some(History {
        x: st.x.iter().zip(&st.v).map(|(x, v)| x - 0.01 * v).collect(),
        v: st.v.iter().map(|v| 0.9 * v).collect(),
    });
    let problem = StepProblem::new(m, &st, 0.01);
    assert!((problem.inertia * 0.01 * 0.01 - 2.25).abs() < 1e-12);
    let dhat = m.barrier.dhat;
    // Half-spaces and boxes act on vertices, spheres on surface triangles.
    let at = |v: usize| Vector3::new(c.x[3 * v], c.x[3 * v + 1], c.x[3 * v + 2]);
    let near: usize = (0..nv)
        .map(|v| {
            m.obstacles
                .iter()
                .filter(|o| o.acts_on_vertices() && o.distance(&at(v)).d < dhat)
                .count()
        })
        .sum();
    let near_faces: Vec<usize> = m
        .obstacles
        .iter()
        .filter(|o| !o.acts_on_vertices())
        .map(|o| {
            m.surface
                .triangles
                .iter()
                .filter(|t| o.triangle_distance(&t.map(|v| at(v as usize))) < dhat)
                .count()
        })
        .collect();
    eprintln!("{near} vertex–obstacle pairs, {near_faces:?} triangles per sphere within d̂");
    assert!(near >= 6, "the case must exercise the vertex barrier");
    let near_box = (0..nv)
        .filter(|&v| m.obstacles[1].distance(&at(v)).d < dhat)
        .count();
    assert!(
        near_box >= 3,
        "the case must exercise the box's vertex barrier"
    );
    assert!(
        near_faces.iter().all(|&n| n >= 4),
        "the case must exercise the surface barrier of each sphere"
    );
    // Gathered elastic gradient in f64, handed over in f32 (the kernel adds the vertex terms).
    let mut ge = vec![[0.0f32; 4]; nv];
    for (v, gv) in ge.iter_mut().enumerate() {
        let mut s = Vector3::zeros();
        for (t, cn) in c.vt.of(v) {
            s += c.cache.grad[t as usize].fixed_rows::<3>(3 * cn as usize);
        }
        *gv = [s.x as f32, s.y as f32, s.z as f32, 0.0];
    }
    // Positions relative to the solver's origin (the centroid); the barrier comes from the
    // obstacle-relative contact records.
    let o = [0.25, 0.0, 0.0];
    let rel = |a: &[f64]| -> Vec<GpuVec4> {
        a.chunks(3)
            .map(|p| {
                [
                    (p[0] - o[0]) as f32,
                    (p[1] - o[1]) as f32,
                    (p[2] - o[2]) as f32,
                    0.0,
                ]
            })
            .collect()
    };
    let mut venergy = vec![0.0f32; nv];
    let mut hbar = vec![GpuMat3::default(); nv];
    let p = Params {
        n: nv as u32,
        f0: problem.inertia as f32,
        f1: m.barrier.kappa as f32,
        f2: dhat as f32,
        f3: (1.0 / (0.01f64 * 0.01)) as f32,
        ..Params::default()
    };
    let contacts = contacts_at(m, &c.x);
    tw::jgs2_vertex_terms(
        &p,
        &rel(&c.x),
        &rel(&problem.x_tilde),
        &rel(&problem.x_start),
        &vinfo(m),
        &contacts,
        &mut ge,
        &mut venergy,
        &mut hbar,
    )
    .unwrap();
    // The surface barrier (the sphere; the box's corner pairs, none in reach here) is added by
    // the face kernel, the box's edge pairs (none in reach) by the edge kernel.
    let surface = SurfaceCsr::new(m).unwrap();
    twins::jgs2_face_terms(
        &p,
        &contacts,
        &surface.vfaces,
        &surface.tris,
        &vinfo(m),
        &mut ge,
        &mut venergy,
        &mut hbar,
    )
    .unwrap();
    let edges = SurfaceEdgeCsr::new(m).unwrap();
    twins::jgs2_edge_terms(
        &p,
        &contacts,
        &edges.vedges,
        &edges.edges,
        &vinfo(m),
        &mut ge,
        &mut venergy,
        &mut hbar,
    )
    .unwrap();
    let g32: Vec<f32> = ge.iter().flat_map(|g| g[..3].to_vec()).collect();
    let g64: Vec<f32> = (0..nv)
        .flat_map(|v| {
            let g = vertex_gradient(&problem, &c.cache, &c.vt, &c.x, v);
            [g.x as f32, g.y as f32, g.z as f32]
        })
        .collect();
    // Inertia m/h²(x − x̃) from f32 positions relative to the centroid (ulp 3e-8 m against
    // |x − x̃| ~ 3e-3 m) plus barrier forces from f32 distances: ~1e-5 relative: 5e-5.
    assert_close(&g32, &g64, 5e-5, "vertex gradient twin vs f64");
    // Vertex energies: the inertia term relative to the step's start (per vertex
    // ½m/h²(x − x₀)·(x + x₀ − 2x̃), as `StepProblem::energy_change` sums it) plus the barrier.
    let e32: f64 = venergy.iter().map(|&e| e as f64).sum();
    let inertia: f64 = (0..nv)
        .map(|v| {
            let (x, x0, xt) = (&c.x, &problem.x_start, &problem.x_tilde);
            let s: f64 = (3 * v..3 * v + 3)
                .map(|i| (x[i] - x0[i]) * (x[i] + x0[i] - 2.0 * xt[i]))
                .sum();
            0.5 * m.mass[v] * problem.inertia * s
        })
        .sum();
    let e64 = inertia + problem.barrier_energy(&c.x);
    eprintln!(
        "inertia change {inertia:.4e} J, barrier {:.4e} J",
        problem.barrier_energy(&c.x)
    );
    // The inertia change and the barrier have opposite signs and partly cancel: the f32 error
    // scales with the per-vertex terms summed, Σ|venergy|, not with their sum. 5e-5 of that.
    let scale: f64 = venergy.iter().map(|&e| (e as f64).abs()).sum();
    let err = (e32 - e64).abs() / scale;
    eprintln!("vertex energies twin vs f64: error {err:.2e} of Σ|terms| {scale:.4e} J");
    assert!(err < 5e-5, "vertex energies twin vs f64: {e32} vs {e64} J");
    let h32: Vec<f32> = hbar.iter().flat_map(m3_words).collect();
    let h64: Vec<f32> = (0..nv)
        .flat_map(|v| m3_words64(&barrier_hessian(&problem, &c.x, v)).map(|w| w as f32))
        .collect();
    // b'' ∝ 1/d² doubles the distance's relative rounding: 1e-5.
    assert_close(&h32, &h64, 1e-5, "barrier hessian twin vs f64");
}

/// A tree's node lists by level, the levels' (offset, length), and the node records.
type TreeLevels = (Vec<u32>, Vec<(u32, u32)>, Vec<[u32; 4]>);

/// The levels of a cluster tree (deepest first) as lists, for `jgs2_tree_sum`.
fn tree_levels(tree: &jello_precompute::tree::ClusterTree) -> TreeLevels {
    let n = tree.len();
    let mut depth = vec![0usize; n];
    for c in 0..n {
        if tree.parent[c] != u32::MAX {
            depth[c] = depth[tree.parent[c] as usize] + 1;
        }
    }
    let mut lists = Vec::new();
    let mut levels = Vec::new();
    for d in (0..=depth.iter().copied().max().unwrap_or(0)).rev() {
        let off = lists.len() as u32;
        lists.extend((0..n as u32).filter(|&c| depth[c as usize] == d));
        levels.push((off, lists.len() as u32 - off));
    }
    let nodes = (0..n)
        .map(|c| {
            let (l, r) = tree.children[c].unwrap_or((tw::NO_CHILD, tw::NO_CHILD));
            [tree.start[c], tree.end[c], l, r]
        })
        .collect();
    (lists, levels, nodes)
}

#[test]
fn rotation_and_frame_twins_match_f64_reference() {
    let mut rng = common::rng("rotation_and_frame_twins_match_f64_reference");
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [6, 2, 2], vec![]);
    let sub = build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let nv = m.num_vertices();
    let (x, x4) = deformed(&m, &mut rng, 0.01);
    let (dm, ep) = rest_data(&m);
    let ne = m.mesh.num_tets();
    let mut f = vec![GpuMat3::default(); ne];
    twins::deformation_gradient(
        &Params {
            n: ne as u32,
            ..Params::default()
        },
        &x4,
        &m.mesh.tets,
        &dm,
        &mut f,
    )
    .unwrap();
    let g64: Vec<f64> = (0..3 * nv).map(|_| rng.random_range(-5.0..5.0)).collect();
    let g4: Vec<GpuVec4> = g64
        .chunks(3)
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect();
    let csr = VertexCsr::new(&m.mesh.tets, nv).unwrap();
    let mut rot = vec![GpuMat3::default(); nv];
    let mut frame = vec![[0.0f32; 4]; nv + tw::NODE_STRIDE * sub.tree.len()];
    let rest: Vec<GpuVec4> = sub
        .rest
        .iter()
        .map(|r| [r.x as f32, r.y as f32, r.z as f32, 0.0])
        .collect();
    tw::jgs2_rotation(
        &Params {
            n: nv as u32,
            ..Params::default()
        },
        &f,
        &ep,
        &csr.offsets,
        &csr.tets,
        &g4,
        &mut rot,
        &mut frame,
    )
    .unwrap();
    let (lists, levels, nodes) = tree_levels(&sub.tree);
    for &(off, len) in &levels {
        tw::jgs2_tree_sum(
            &Params {
                n: len,
                u0: nv as u32,
                u1: off,
                ..Params::default()
            },
            &lists,
            &nodes,
            &sub.tree.perm,
            &rest,
            &mut frame,
        )
        .unwrap();
    }
    let vt = VertexTets::new(&m.mesh);
    let r64 = rotations(&m, &x, &vt);
    let tf = rest_frame_gradients(&g64, Some(&r64), &sub.tree, &sub.rest);
    let r32: Vec<f32> = rot.iter().flat_map(m3_words).collect();
    let rr: Vec<f32> = r64
        .iter()
        .flat_map(|r| m3_words64(r).map(|w| w as f32))
        .collect();
    // Polar factor of the volume-weighted mean F (stretches 1 ± 3 %): the f32 SVD recovers U·Vᵀ
    // to ~1e-6; F itself carries the positions' f32 rounding / edge length ~1e-6: 1e-5.
    assert_close(&r32, &rr, 1e-5, "rotations twin vs f64");
    let gh32: Vec<f32> = frame[..nv].iter().flat_map(|v| v[..3].to_vec()).collect();
    let gh64: Vec<f32> = tf
        .ghat
        .iter()
        .flat_map(|v| [v.x as f32, v.y as f32, v.z as f32])
        .collect();
    assert_close(&gh32, &gh64, 1e-5, "rest-frame gradients twin vs f64");
    let gs32: Vec<f32> = frame[nv..].iter().flat_map(|v| v[..3].to_vec()).collect();
    let gs64: Vec<f32> = (0..sub.tree.len())
        .flat_map(|c| {
            let m = &tf.moments[c];
            [tf.sums[c], m[0], m[1], m[2]]
        })
        .flat_map(|v| [v.x as f32, v.y as f32, v.z as f32])
        .collect();
    // Sums of up to nv rotated gradients with random signs (and, for the moments, signed rest
    // offsets): cancellation costs a decade: 1e-4.
    assert_close(&gs32, &gs64, 1e-4, "tree sums and moments twin vs f64");
}

#[test]
fn system_and_hess_vec_twins_match_f64_reference() {
    let mut rng = common::rng("system_and_hess_vec_twins_match_f64_reference");
    let c = ref_case(&mut rng);
    let m = &c.m;
    let nv = m.num_vertices();
    let sub = build_subspace(m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let blob = DeviceJgs2::pack_subspace(m, &sub).unwrap();
    let st = state_of(m, &mut rng);
    let problem = StepProblem::new(m, &st, 0.01);
    let g64: Vec<f64> = (0..nv)
        .flat_map(|v| {
            let g = vertex_gradient(&problem, &c.cache, &c.vt, &c.x, v);
            [g.x, g.y, g.z]
        })
        .collect();
    let r64 = rotations(m, &c.x, &c.vt);
    let tf = rest_frame_gradients(&g64, Some(&r64), &sub.tree, &sub.rest);
    // The twin gets the f64 inputs in f32: only its own arithmetic differs.
    let v4 = |v: &Vector3<f64>| [v.x as f32, v.y as f32, v.z as f32, 0.0];
    let g4: Vec<GpuVec4> = g64
        .chunks(3)
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect();
    let rot: Vec<GpuMat3> = r64.iter().map(m3_f64).collect();
    let mut frame: Vec<GpuVec4> = tf.ghat.iter().map(v4).collect();
    for (s, m) in tf.sums.iter().zip(&tf.moments) {
        frame.extend([v4(s), v4(&m[0]), v4(&m[1]), v4(&m[2])]);
    }
    let hess: Vec<f32> = c
        .cache
        .hess
        .iter()
        .flat_map(|h| (0..144).map(move |k| h[(k / 12, k % 12)] as f32))
        .collect();
    let free: Vec<u32> = (0..nv as u32).filter(|&v| !m.pinned[v as usize]).collect();
    let ih2 = (1.0 / (0.01f64 * 0.01)) as f32;
    let mut sys = vec![GpuLocalSystem::default(); nv];
    tw::jgs2_system(
        &Params {
            n: free.len() as u32,
            u0: nv as u32,
            f0: ih2,
            ..Params::default()
        },
        &free,
        &blob,
        &g4,
        &rot,
        &frame,
        &hess,
        &mut sys,
    )
    .unwrap();
    let mut vsys = vec![GpuLocalSystem::default(); nv];
    tw::vbd_system(
        &Params {
            n: free.len() as u32,
            f0: ih2,
            ..Params::default()
        },
        &free,
        &vinfo(m),
        &g4,
        &hess,
        &c.vt.offsets,
        &c.vt.packed(),
        &mut vsys,
    )
    .unwrap();
    let (mut a32, mut a64, mut r32, mut r64v, mut f32v, mut f64v) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for &i in &free {
        let i = i as usize;
        let hb = barrier_hessian(&problem, &c.x, i);
        let hb32 = m3_f64(&hb).to_glam();
        let (a, r) = jgs2_system(
            &problem,
            &c.cache,
            &c.vt,
            &c.x,
            &g64,
            Some(&r64),
            &tf,
            i,
            &sub.vertices[i],
        );
        a32.extend(m3_words(&GpuMat3::from_glam(sys[i].a.to_glam() + hb32)));
        a64.extend(m3_words64(&a).map(|w| w as f32));
        r32.extend(&sys[i].r[..3]);
        r64v.extend([r.x as f32, r.y as f32, r.z as f32]);
        let (av, rv) = vbd_system(&problem, &c.cache, &c.vt, &c.x, &g64, i);
        f32v.extend(m3_words(&GpuMat3::from_glam(vsys[i].a.to_glam() + hb32)));
        f64v.extend(m3_words64(&av).map(|w| w as f32));
        assert_eq!(sys[i].r_fallback, vsys[i].r, "fallback r = g_i");
        assert!((rv.x as f32 - vsys[i].r[0]).abs() <= 1e-6 * rv.norm() as f32 + 1e-12);
        // The JGS2 kernel's fallback is the VBD system.
        let d: f32 = (0..9)
            .map(|k| (m3_words(&sys[i].a_fallback)[k] - m3_words(&vsys[i].a)[k]).abs())
            .sum();
        assert!(d <= 1e-5 * m3_words(&vsys[i].a).iter().map(|v| v.abs()).sum::<f32>());
    }
    // A: sums of positive-semidefinite f32 triple products (no cancellation), rotated: 1e-5.
    assert_close(&a32, &a64, 1e-5, "jgs2 system matrix twin vs f64");
    // r = g_i + R_i Σ (~100 near/far terms) with partial cancellation: 5e-5.
    assert_close(&r32, &r64v, 5e-5, "jgs2 system rhs twin vs f64");
    assert_close(&f32v, &f64v, 1e-5, "vbd system matrix twin vs f64");
    // Hessian-vector products of three random directions (zero on pinned vertices).
    let dirs64: Vec<Vec<f64>> = (0..3)
        .map(|_| {
            (0..3 * nv)
                .map(|k| {
                    if m.pinned[k / 3] {
                        0.0
                    } else {
                        rng.random_range(-1e-3..1e-3)
                    }
                })
                .collect()
        })
        .collect();
    let dirs4: Vec<GpuVec4> = dirs64
        .iter()
        .flat_map(|d| {
            d.chunks(3)
                .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
                .collect::<Vec<_>>()
        })
        .collect();
    let hbar: Vec<GpuMat3> = (0..nv)
        .map(|v| m3_f64(&barrier_hessian(&problem, &c.x, v)))
        .collect();
    let mut out = vec![[0.0f32; 4]; 3 * nv];
    tw::hess_vec(
        &Params {
            n: nv as u32,
            u0: 3,
            f0: ih2,
            ..Params::default()
        },
        &hess,
        &m.mesh.tets,
        &c.vt.offsets,
        &c.vt.packed(),
        &vinfo(m),
        &hbar,
        &dirs4,
        &mut out,
    )
    .unwrap();
    for (q, d) in dirs64.iter().enumerate() {
        let want: Vec<f32> = hess_vec(&problem, &c.cache, &c.vt, &c.x, d)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let got: Vec<f32> = out[q * nv..(q + 1) * nv]
            .iter()
            .flat_map(|v| v[..3].to_vec())
            .collect();
        // Mass + barrier + ~25 element blocks per vertex, random directions: 1e-5.
        assert_close(&got, &want, 1e-5, &format!("hess_vec {q} twin vs f64"));
    }
}

#[test]
fn step_bounds_and_filters_match_f64_reference() {
    let mut rng = common::rng("step_bounds_and_filters_match_f64_reference");
    let c = ref_case(&mut rng);
    let m = &c.m;
    let nv = m.num_vertices();
    let nc = m.obstacles.len();
    let st = state_of(m, &mut rng);
    let problem = StepProblem::new(m, &st, 0.01);
    let contacts = contacts_at(m, &c.x);
    // A step that drives many vertices into the obstacles.
    let step: Vec<f64> = (0..3 * nv)
        .map(|k| {
            if m.pinned[k / 3] {
                0.0
            } else {
                rng.random_range(-3e-3..3e-3)
            }
        })
        .collect();
    let mut dirs = vec![[0.0f32; 4]; 3 * nv];
    for v in 0..nv {
        dirs[v] = [
            step[3 * v] as f32,
            step[3 * v + 1] as f32,
            step[3 * v + 2] as f32,
            0.0,
        ];
    }
    let mut s4 = vec![[0.0f32; 4]; nv];
    let mut bound = vec![0.0f32; nv];
    tw::jgs2_combine(
        &Params {
            n: nv as u32,
            f0: 1.0,
            ..Params::default()
        },
        &dirs,
        &contacts,
        &mut s4,
        &mut bound,
    )
    .unwrap();
    let alpha32 = 1.0 / bound.iter().fold(0.0f32, |a, &b| a.max(b)) as f64;
    let alpha64 = problem.max_obstacle_step(&c.x, &step);
    eprintln!("obstacle step bound: twin {alpha32:.6e}, f64 {alpha64:.6e}");
    assert!(alpha64 < 0.5, "the case must exercise the filter");
    // Per vertex, the filter of vertex_solve against Obstacle::time_of_impact in f64. The twin's
    // α = 0.9 d/(−n·δ) takes d from the f32 contact record, whose rounding is a few f32 ulps of
    // the position's magnitude: α's relative error is that over d (1.2e-5 was seen at d ≈ 5 mm,
    // where a flat 1e-5 failed), plus 1e-5 for the rest of the f32 arithmetic.
    let mut worst_rel = 1e-5f64;
    for v in 0..nv {
        let p = Vector3::new(c.x[3 * v], c.x[3 * v + 1], c.x[3 * v + 2]);
        let d = Vector3::new(step[3 * v], step[3 * v + 1], step[3 * v + 2]);
        let mut a64 = 1.0f64;
        let mut rel = 1e-5f64;
        for o in &m.obstacles {
            let toi = o.time_of_impact(&p, &d);
            if toi < 1.0 && 0.9 * toi < a64 {
                a64 = 0.9 * toi;
                let dist = o.distance(&p).d.abs().max(1e-12);
                rel = 1e-5 + 8.0 * f32::EPSILON as f64 * (p.norm() + 1.0) / dist;
            }
        }
        worst_rel = worst_rel.max(rel);
        let d32 = Vec3::new(d.x as f32, d.y as f32, d.z as f32);
        let a32 = tw::contact_step_bound(&contacts[v * nc..v * nc + nc], d32) as f64;
        assert!(
            (a32 - a64).abs() <= rel * a64 + 1e-7,
            "vertex {v}: α {a32} vs {a64} (tolerance {rel:.1e} relative)"
        );
    }
    // The step's bound is the least of the vertices' (same tolerance as the worst of them).
    assert!(
        (alpha32 - alpha64).abs() <= worst_rel * alpha64,
        "bound {alpha32} vs {alpha64}"
    );
}

#[test]
fn contact_records_track_the_f64_distance() {
    let mut rng = common::rng("contact_records_track_the_f64_distance");
    // A vertex 1 µm from each obstacle, 0.3 m from the origin, moved by 200 random small steps:
    // the advanced records keep the distance to f32 relative precision, which positions in f32
    // (ulp 3e-8 m at 0.3 m) cannot.
    let obstacles = [
        Obstacle::half_space([0.3, 1.0, -0.2], 0.1),
        Obstacle::Sphere {
            center: [0.1, -0.2, 0.05],
            radius: 0.25,
        },
        Obstacle::Box {
            min: [0.2, 0.1, -0.1],
            max: [0.4, 0.3, 0.1],
        },
    ];
    let starts = [
        {
            let n = Vector3::new(0.3, 1.0, -0.2).normalize();
            // On the plane n·x = offset (normalised), then 1 µm out.
            let off = 0.1 / Vector3::new(0.3, 1.0, -0.2).norm();
            n * (off + 1e-6) + Vector3::new(0.2, 0.0, 0.2) - n * n.dot(&Vector3::new(0.2, 0.0, 0.2))
        },
        Vector3::new(0.1, -0.2, 0.05) + Vector3::new(1.0, 0.5, 0.2).normalize() * (0.25 + 1e-6),
        Vector3::new(0.3, 0.3 + 1e-6, 0.0),
    ];
    for (o, x0) in obstacles.iter().zip(starts) {
        let mut x = x0;
        let mut c = GpuContact::at(o, [x.x, x.y, x.z]);
        let mut worst = 0.0f64;
        for _ in 0..200 {
            let d = o.distance(&x).d;
            // Small moves, biased away when close (stay outside).
            let mut s = Vector3::new(
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
            ) * (0.3 * d);
            let n = o.distance(&x).grad;
            if s.dot(&n) < 0.0 {
                s -= n * (0.5 * s.dot(&n));
            }
            let s32 = Vec3::new(s.x as f32, s.y as f32, s.z as f32);
            c = tw::contact_advance(&c, s32);
            x += Vector3::new(s32.x as f64, s32.y as f64, s32.z as f64);
            let want = o.distance(&x).d;
            let got = tw::contact_distance(&c).d as f64;
            worst = worst.max((got - want).abs() / want.abs());
        }
        eprintln!("{o:?}: worst relative distance error {worst:.2e}");
        // Each advance rounds d and the move's normal component to f32: the error random-walks
        // at ~1e-7 per step; 200 steps stay below 1e-5. (From f32 positions the error would be
        // ~3e-8 m / 1e-6 m = 3e-2.)
        assert!(worst < 1e-5, "tracked distance drifts: {worst:e}");
    }
}

#[test]
fn packed_subspace_holds_every_block() {
    let m = beam(MaterialModel::Arap, 1e5, [5, 2, 2], vec![]);
    let sub = build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let blob = DeviceJgs2::pack_subspace(&m, &sub).unwrap();
    let vt = VertexTets::new(&m.mesh);
    let f = |w: u32| f32::from_bits(w);
    for (v, vs) in sub.vertices.iter().enumerate() {
        let (off, n_inc, n_near, n_far) = (
            blob[4 * v] as usize,
            blob[4 * v + 1] as usize,
            blob[4 * v + 2] as usize,
            (blob[4 * v + 3] & !tw::FAR_LINEAR) as usize,
        );
        let linear = blob[4 * v + 3] & tw::FAR_LINEAR != 0;
        if m.pinned[v] {
            assert_eq!((n_inc, n_near, n_far), (0, 0, 0));
            continue;
        }
        assert_eq!(
            (n_inc, n_near, n_far),
            (vs.incident.len(), vs.near.len(), vs.far.len())
        );
        for k in 0..9 {
            assert_eq!(f(blob[off + k]), vs.a_hat[k] as f32);
        }
        assert_eq!(f(blob[off + 9]), m.mass[v] as f32);
        let near0 = off + 10 + 5 * n_inc;
        for (k, (j, b)) in vs.near.iter().enumerate() {
            assert_eq!(blob[near0 + 10 * k], *j);
            for w in 0..9 {
                assert_eq!(f(blob[near0 + 10 * k + 1 + w]), b[w] as f32);
            }
        }
        let far0 = near0 + 10 * n_near;
        // The default subspace is first order: every sample carries its slopes.
        assert_eq!(linear, !vs.far.is_empty(), "vertex {v}: first-order flag");
        let stride = if linear { 37 } else { 10 };
        for (k, fs) in vs.far.iter().enumerate() {
            let q = far0 + stride * k;
            assert_eq!(blob[q], fs.node);
            for w in 0..9 {
                assert_eq!(f(blob[q + 1 + w]), fs.block[w] as f32);
            }
            let sl = fs.slopes.expect("first-order sample");
            for w in 0..27 {
                assert_eq!(f(blob[q + 10 + w]), sl[w] as f32);
            }
        }
        // Every incident 12×3 block, rebuilt from its four corner references.
        for (t, ((e, corner), ub)) in vt.of(v).zip(&vs.incident).enumerate() {
            let q = off + 10 + 5 * t;
            assert_eq!(blob[q], 4 * e + corner as u32);
            let tet = m.mesh.tets[e as usize];
            for cc in 0..4 {
                let s = blob[q + 1 + cc];
                for d in 0..3 {
                    for col in 0..3 {
                        let want = ub[(3 * cc + d) * 3 + col] as f32;
                        let got = if s == tw::ZERO_BLOCK {
                            0.0
                        } else {
                            assert_eq!(blob[s as usize - 1], tet[cc], "block's vertex");
                            f(blob[s as usize + 3 * d + col])
                        };
                        assert_eq!(got, want, "vertex {v}, element {e}, corner {cc}");
                    }
                }
            }
        }
    }
    // A subspace of another model is refused.
    let other = beam(MaterialModel::Arap, 1e5, [4, 2, 2], vec![]);
    assert!(DeviceJgs2::pack_subspace(&other, &sub).is_err());
    let params = Jgs2Params::default();
    assert!(DeviceJgs2::new(Device::cpu(), &other, params, Some(Arc::new(sub))).is_err());
}

// ---------------------------------------------------------------- solver level

/// The four solvers of a model: (name, params, subspace?).
fn modes(jgs2_eps: f64, vbd_eps: f64) -> Vec<(Variant, Safeguard, bool, f64)> {
    // (variant, safeguard, JGS2?, ε)
    vec![
        (Variant::Jacobi, Safeguard::Cut, true, jgs2_eps),
        // The model step at every iteration (the cut's fallback on violent steps).
        (Variant::Jacobi, Safeguard::Always, true, jgs2_eps),
        (Variant::GaussSeidel, Safeguard::Cut, true, jgs2_eps),
        (Variant::GaussSeidel, Safeguard::Off, false, vbd_eps),
        (Variant::Jacobi, Safeguard::Cut, false, vbd_eps),
        // Without the safeguard: the paper's plain JGS2 Jacobi iteration. (Plain JGS2
        // Gauss–Seidel diverges on this beam in the f64 reference too: a colour's subspace
        // assumes the other colours follow.)
        (Variant::Jacobi, Safeguard::Off, true, jgs2_eps),
    ]
}

struct Run {
    name: String,
    iterations: Vec<usize>,
    x: Vec<Vec<f64>>,
}

/// `steps` steps of `solver` from `state`, each from its own previous result.
fn run_steps(m: &Model, solver: &mut dyn StepSolver, state: &State, steps: usize) -> Run {
    let mut st = state.clone();
    let mut run = Run {
        name: solver.name(),
        iterations: vec![],
        x: vec![],
    };
    for k in 0..steps {
        let problem = StepProblem::new(m, &st, 0.01);
        let mut x = Vec::new();
        let r = solver
            .step(&problem, m as &dyn ElasticTerms, &mut x, false)
            .unwrap();
        assert!(
            r.converged,
            "{} step {k}: not converged (residual {:e})",
            run.name, r.residual
        );
        for (i, xi) in x.iter().enumerate() {
            st.v[i] = (xi - st.x[i]) / 0.01;
        }
        st.x = x.clone();
        st.t += 0.01;
        run.iterations.push(r.iterations);
        run.x.push(x);
    }
    run
}

fn max_dev(a: &[f64], b: &[f64]) -> f64 {
    a.chunks(3)
        .zip(b.chunks(3))
        .map(|(p, q)| (0..3).map(|k| (p[k] - q[k]).powi(2)).sum::<f64>().sqrt())
        .fold(0.0, f64::max)
}

/// Runs every mode on the f64 reference, the CPU twins and the GPU from the same state and
/// compares iterations and positions (bounds relative to the bounding-box diagonal).
#[allow(clippy::too_many_arguments)]
fn compare_solvers(
    label: &str,
    m: &Model,
    state: &State,
    steps: usize,
    modes: &[(Variant, Safeguard, bool, f64)],
    check: &dyn Fn(&Run),
    bound: &dyn Fn(&str) -> f64,
    iteration_slack: &dyn Fn(usize) -> usize,
) {
    let diag = bbox_diagonal(m);
    let sub = Arc::new(build_subspace(m, 0.01, &SubspaceOptions::node_fits()).unwrap());
    for &(variant, safeguard, jgs2, eps) in modes {
        let params = Jgs2Params {
            stop: StopRule::Cn { eps },
            max_iterations: 3000,
            variant,
            safeguard,
        };
        let s = jgs2.then(|| sub.clone());
        let mut reference = match &s {
            Some(s) => Jgs2Solver::jgs2(m, params, s.clone()).unwrap(),
            None => Jgs2Solver::vbd(m, params),
        };
        let r = run_steps(m, &mut reference, state, steps);
        let mut devices: Vec<(&str, Device)> = vec![("cpu twins", Device::cpu())];
        if let Some(g) = gpu() {
            devices.push(("gpu", g));
        }
        for (dname, dev) in devices {
            let mut d = DeviceJgs2::new(dev, m, params, s.clone()).unwrap();
            assert_eq!(d.name(), r.name);
            let t = std::time::Instant::now();
            let run = run_steps(m, &mut d, state, steps);
            let dev_rel: Vec<f64> = run
                .x
                .iter()
                .zip(&r.x)
                .map(|(a, b)| max_dev(a, b) / diag)
                .collect();
            eprintln!(
                "{label} {} on {dname} ({:.0?}): iterations {:?} (f64 {:?}), max deviation / diagonal {:?}",
                r.name,
                t.elapsed(),
                run.iterations,
                r.iterations,
                dev_rel.iter().map(|v| format!("{v:.1e}")).collect::<Vec<_>>()
            );
            check(&run);
            for (k, (&a, &b)) in run.iterations.iter().zip(&r.iterations).enumerate() {
                assert!(
                    a.abs_diff(b) <= iteration_slack(b),
                    "{label} {} on {dname}, step {k}: {a} iterations vs {b} (f64)",
                    r.name
                );
            }
            let worst = dev_rel.iter().copied().fold(0.0, f64::max);
            assert!(
                worst <= bound(&r.name),
                "{label} {} on {dname}: deviation {worst:e} of the diagonal from the f64 solver",
                r.name
            );
        }
    }
}

#[test]
fn device_solvers_match_f64_on_a_cantilever() {
    let _gpu = gpu_lock();
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [8, 2, 2], vec![]);
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    for (k, v) in state.v.iter_mut().enumerate() {
        if !m.pinned[k / 3] && k % 3 == 1 {
            *v = -2.0;
        }
    }
    compare_solvers(
        "cantilever",
        &m,
        &state,
        3,
        &modes(1e-6, 1e-5),
        &|_| {},
        // Both sides stop at a CN residual below ε, so they agree only to what that residual
        // leaves open (more in the soft modes, which VBD converges slowly): measured ≤ 5e-6 of
        // the diagonal (one GPU step of JGS2-Jacobi; typically 1e-7).
        &|_| 1e-4,
        // The same algorithm; f32 rounding moves the last iteration across the threshold.
        &|it| 2 + it / 10,
    );
}

#[test]
fn device_solvers_match_f64_on_a_drop_onto_the_ground() {
    let _gpu = gpu_lock();
    let m = drop_ball();
    let state = m.initial_state(&vec![[0.0, -1.0, 0.0]; m.num_vertices()]);
    compare_solvers(
        "drop",
        &m,
        &state,
        6,
        &modes(1e-5, 1e-5)[..3],
        &|run| {
            for (k, x) in run.x.iter().enumerate() {
                let miny = x.chunks(3).map(|p| p[1]).fold(f64::INFINITY, f64::min);
                assert!(
                    miny > 0.0,
                    "{} step {k}: a vertex at or below the ground ({miny:e})",
                    run.name
                );
            }
        },
        // In contact the lowest vertices rest ~6e-7 m (2e-3 d̂) above the ground, where the
        // barrier is stiff and the CN tolerance leaves each step's solution loose by ~1e-5 of the
        // diagonal; f32 noise (positions 7e-9 m apart, ~1 % of that gap) picks a different point
        // inside that tolerance and the trajectories drift apart over 6 steps: measured ≤ 1.3e-4.
        &|_| 1e-3,
        // Near the barrier the last digits of the residual are f32 noise: measured up to 2× the
        // f64 count on one step.
        &|it| 5 + 2 * it,
    );
}

/// `drop_ball` falling at 1 m/s onto the edge of a box (its top 1 cm under the ball, its edge
/// z = 13 mm under the ball's side): the box's edge–edge and corner–triangle pairs and its
/// vertex barrier all act, and the device lands where the f64 reference does.
#[test]
fn device_solvers_match_f64_on_a_drop_onto_a_box_edge() {
    let _gpu = gpu_lock();
    let mut m = drop_ball();
    m.obstacles = vec![Obstacle::Box {
        min: [-0.3, -0.1, -0.3],
        max: [0.3, 0.0, 0.013],
    }];
    let state = m.initial_state(&vec![[0.0, -1.0, 0.0]; m.num_vertices()]);
    let dhat = m.barrier.dhat;
    let mm = &m;
    compare_solvers(
        "box edge",
        &m,
        &state,
        2,
        // JGS2 Jacobi and Gauss–Seidel with the cut safeguard (the drop onto the ground runs
        // the always-on safeguard too).
        &[modes(1e-5, 1e-5)[0], modes(1e-5, 1e-5)[2]],
        &|run| {
            let x = run.x.last().unwrap();
            let at = |v: u32| Vector3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]);
            let gap = mm
                .surface
                .triangles
                .iter()
                .map(|t| mm.obstacles[0].triangle_distance(&t.map(at)))
                .fold(f64::INFINITY, f64::min);
            assert!(
                gap > 0.0 && gap < dhat,
                "{}: closest triangle {gap:e} m",
                run.name
            );
            let st = State::new(x.clone(), vec![0.0; x.len()], 0.0);
            let pairs = StepProblem::new(mm, &st, 0.01).surface_pairs(x);
            let edges = pairs
                .iter()
                .filter(|(p, _)| matches!(p.kind, PairKind::EdgeEdge { .. }))
                .count();
            assert!(edges >= 1, "{}: no edge–edge pair in reach", run.name);
        },
        // As the drop onto the ground: the CN tolerance leaves the resting gap loose, and f32
        // noise picks another point inside it.
        &|_| 1e-3,
        &|it| 5 + 2 * it,
    );
}

#[test]
fn reports_cap_trace_and_dx_rule_like_the_reference() {
    let _gpu = gpu_lock();
    let m = beam(MaterialModel::Arap, 1e6, [6, 2, 2], vec![]);
    let sub = Arc::new(build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap());
    let mut st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    for (k, v) in st.v.iter_mut().enumerate() {
        if !m.pinned[k / 3] && k % 3 == 1 {
            *v = -2.0;
        }
    }
    let problem = StepProblem::new(&m, &st, 0.01);
    let has_gpu = gpu().is_some();
    let device = |on_gpu: bool| {
        if on_gpu {
            gpu().unwrap()
        } else {
            Device::cpu()
        }
    };
    for on_gpu in [false, true].into_iter().filter(|&g| !g || has_gpu) {
        let on = if on_gpu { "gpu" } else { "cpu twins" };
        // (1) A step that hits the cap is reported as not converged.
        let capped = Jgs2Params {
            stop: StopRule::Cn { eps: 1e-12 },
            max_iterations: 2,
            variant: Variant::Jacobi,
            safeguard: Safeguard::Cut,
        };
        let mut d = DeviceJgs2::new(device(on_gpu), &m, capped, Some(sub.clone())).unwrap();
        let mut x = Vec::new();
        let r = d
            .step(&problem, &m as &dyn ElasticTerms, &mut x, true)
            .unwrap();
        assert_eq!(r.iterations, 2, "{on}");
        assert!(
            !r.converged && r.residual > 1e-12,
            "{on}: capped step reported converged"
        );
        // (2) The trace: the start and one record per iteration, finite, energies relative to
        // the step's start (0 there, as the reference's), the safeguard's energy never rising
        // beyond its f32 allowance (DeviceJgs2::ENERGY_SLACK of the terms' magnitude, here
        // bounded below by Σ|Ψ_e(x_start)| in f64).
        let tr = r.trace.as_ref().expect("trace requested");
        assert_eq!(tr.len(), r.iterations + 1);
        assert_eq!(tr[0].alpha, 1.0);
        assert_eq!(tr[0].energy, 0.0, "{on}: the start's energy change");
        let magnitude = m.elastic_reference(&problem.x_start).magnitude;
        for w in tr.windows(2) {
            assert!(w[1].residual.is_finite() && w[1].energy.is_finite());
            assert!(w[1].alpha > 0.0 && w[1].alpha <= 1.0);
            assert!(
                w[1].energy
                    <= w[0].energy + DeviceJgs2::ENERGY_SLACK * (w[0].energy.abs() + magnitude),
                "{on}: energy rose {} → {}",
                w[0].energy,
                w[1].energy
            );
        }
        // The report's energies are the f64 values at the returned positions.
        assert_eq!(r.energy, problem.energy(&m, &x));
        assert_eq!(r.energy_change, problem.energy_change(&m, &x));
        // The reference's trace under the same cap: the same iterates up to f32 rounding.
        let mut reference = Jgs2Solver::jgs2(&m, capped, sub.clone()).unwrap();
        let mut xr = Vec::new();
        let rr = reference
            .step(&problem, &m as &dyn ElasticTerms, &mut xr, true)
            .unwrap();
        assert_eq!(rr.iterations, 2);
        for (a, b) in tr.iter().zip(rr.trace.as_ref().unwrap()) {
            // The residual is a norm of forces that nearly cancel: f32 keeps ~1e-3 of it;
            // energies (positive sums) ~1e-6; the step fractions are the same up to rounding.
            assert!(
                (a.residual - b.residual).abs() <= 1e-3 * b.residual,
                "{on}: {a:?} vs {b:?}"
            );
            eprintln!(
                "{on}: trace energy change {:.9e} J (f64 {:.9e} J)",
                a.energy, b.energy
            );
            assert!(
                (a.energy - b.energy).abs() <= 1e-6 * (b.energy.abs() + magnitude),
                "{on}: {a:?} vs {b:?}"
            );
            assert!((a.alpha - b.alpha).abs() <= 1e-4, "{on}: {a:?} vs {b:?}");
        }
        // (3) The paper's Dx rule, for both variants.
        for variant in [Variant::Jacobi, Variant::GaussSeidel] {
            let params = Jgs2Params {
                stop: StopRule::Dx { tol: 1e-5 },
                max_iterations: 500,
                variant,
                safeguard: Safeguard::Cut,
            };
            let mut dd = DeviceJgs2::new(device(on_gpu), &m, params, Some(sub.clone())).unwrap();
            let mut x = Vec::new();
            let r = dd
                .step(&problem, &m as &dyn ElasticTerms, &mut x, false)
                .unwrap();
            let mut reference = Jgs2Solver::jgs2(&m, params, sub.clone()).unwrap();
            let mut xr = Vec::new();
            let rr = reference
                .step(&problem, &m as &dyn ElasticTerms, &mut xr, false)
                .unwrap();
            eprintln!(
                "{on}: Dx rule, {variant:?}: {} iterations (f64 {})",
                r.iterations, rr.iterations
            );
            assert!(r.converged && rr.converged);
            assert!(r.iterations.abs_diff(rr.iterations) <= 1 + rr.iterations / 10);
            // The last move is below 1e-5 of the extent on both: they agree to ~that.
            assert!(max_dev(&x, &xr) <= 1e-4 * bbox_diagonal(&m));
        }
    }
}

#[test]
fn position_buffer_holds_the_step_result() {
    let _gpu = gpu_lock();
    let Some(dev) = gpu() else { return };
    let m = beam(MaterialModel::StableNeoHookean, 1e7, [6, 2, 2], vec![]);
    let sub = Arc::new(build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap());
    // Three iterations per step (ε unreachable): safeguarded Jacobi ping-pongs two position
    // buffers, so the result lands in the second and must be copied back.
    let params = Jgs2Params {
        stop: StopRule::Cn { eps: 1e-30 },
        max_iterations: 3,
        ..Jgs2Params::default()
    };
    let mut d = DeviceJgs2::new(dev, &m, params, Some(sub)).unwrap();
    // Kicked downwards, so three iterations leave residuals far above the f32 noise floor.
    let mut st = m.initial_state(&vec![[0.0, -3.0, 0.0]; m.num_vertices()]);
    let mut odd = false;
    for _ in 0..3 {
        let problem = StepProblem::new(&m, &st, 0.01);
        let mut x = Vec::new();
        let r = d
            .step(&problem, &m as &dyn ElasticTerms, &mut x, false)
            .unwrap();
        odd |= r.iterations % 2 == 1;
        // The returned positions are the final iterate: their f64 residual is the reported one
        // (an iterate behind, it would be several times larger).
        let mut g = vec![0.0; x.len()];
        problem.gradient(&m, &x, &mut g);
        let res = m.char_norm.residual(&g);
        assert!(
            (res - r.residual).abs() <= 0.1 * r.residual,
            "f64 residual at the result {res:e} vs reported {:e}",
            r.residual
        );
        let buf = d.positions_buffer().expect("GPU position buffer").clone();
        let gd = d.device().as_gpu().unwrap();
        let (device, queue) = (gd.device(), gd.queue());
        let size = buf.size();
        assert!(size >= 16 * m.num_vertices() as u64);
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("test readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&buf, 0, &staging, 0, size);
        queue.submit([enc.finish()]);
        staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let words: Vec<f32> = bytemuck::cast_slice(&staging.get_mapped_range(..).unwrap()).to_vec();
        let o = d.origin();
        for v in 0..m.num_vertices() {
            for k in 0..3 {
                let want = x[3 * v + k] - o[k];
                assert!((words[4 * v + k] as f64 - want).abs() <= 1e-12 + 1e-15 * want.abs());
            }
            assert_eq!(words[4 * v + 3], 0.0, "w = 0");
        }
        for (i, xi) in x.iter().enumerate() {
            st.v[i] = (xi - st.x[i]) / 0.01;
        }
        st.x = x;
    }
    assert!(odd, "no step exercised the copy back");
}

#[test]
fn oversized_buffers_are_a_clear_error() {
    let _gpu = gpu_lock();
    // A host device whose storage bindings are limited to 64 KiB (as a small adapter's would
    // be): the subspace of this beam does not fit, and the error names it.
    let Some(adapter) = common::host_adapter() else {
        return;
    };
    let limit = 64 * 1024;
    let limits = wgpu::Limits {
        max_storage_buffer_binding_size: limit,
        ..wgpu::Limits::default()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .unwrap();
    let m = beam(MaterialModel::StableNeoHookean, 1e6, [8, 2, 2], vec![]);
    let sub = build_subspace(&m, 0.01, &SubspaceOptions::node_fits()).unwrap();
    let bytes = 4 * DeviceJgs2::pack_subspace(&m, &sub).unwrap().len();
    assert!(
        bytes > limit as usize,
        "the case needs a subspace over the limit ({bytes} B)"
    );
    let dev = Device::from_wgpu(device, queue).unwrap();
    let err = DeviceJgs2::new(dev, &m, Jgs2Params::default(), Some(Arc::new(sub)))
        .err()
        .expect("a subspace over the binding limit is an error")
        .to_string();
    eprintln!("{err}");
    assert!(
        err.contains("JGS2 subspace") && err.contains("MiB"),
        "{err}"
    );
    // Without the subspace (VBD) the next too large buffer is named: the element Hessians
    // (576 B per element).
    let adapter2 = common::host_adapter().expect("an adapter exists (first device succeeded)");
    let (device2, queue2) = pollster::block_on(adapter2.request_device(&wgpu::DeviceDescriptor {
        required_limits: limits,
        ..Default::default()
    }))
    .unwrap();
    let dev = Device::from_wgpu(device2, queue2).unwrap();
    let err = DeviceJgs2::new(dev, &m, Jgs2Params::default(), None)
        .err()
        .expect("element Hessians over the binding limit are an error")
        .to_string();
    eprintln!("{err}");
    assert!(err.contains("element Hessians"), "{err}");
}

/// A stable Neo-Hookean ball thrown at the ground at 30 m/s (its impact step inverts elements
/// when nothing prevents it), on the device through the runner: under the default
/// `inversion = "forbid"` every step ends with every element positive — the strict retries run
/// on the f64 reference (`Simulation::set_strict_solver`). With inversion allowed the same
/// device steps end inverted: the test can fail.
#[test]
fn forbid_holds_on_the_device_through_the_f64_strict_retries() {
    if gpu().is_none() {
        return;
    }
    let text = r#"
[simulation]
h = 0.01
steps = 2
[solver]
max_iterations = 200
[[objects]]
name = "ball"
mesh = { generator = "ball", center = [0.0, 0.12, 0.0], radius = 0.1, resolution = 6 }
material = { model = "stable_neo_hookean", youngs_modulus = 5e4, poisson_ratio = 0.4, density = 1000.0 }
velocity = [0.0, -30.0, 0.0]
[[obstacles]]
type = "ground"
"#;
    for solver in ["vbd", "jgs2"] {
        let mut built = jello::scene::Scene::parse(std::path::Path::new("thrown.toml"), text)
            .unwrap()
            .build()
            .unwrap();
        built.config.solver = solver.parse().unwrap();
        let mut with = jello::runner::setup(&built, jello::gpu::Backend::Gpu, None)
            .unwrap()
            .sim;
        // The same device solver with inversion allowed: the impact does invert elements.
        let m = &built.model;
        let params = Jgs2Params {
            max_iterations: 200,
            variant: if solver == "vbd" {
                Variant::GaussSeidel
            } else {
                Variant::Jacobi
            },
            safeguard: if solver == "jgs2" {
                Safeguard::Cut
            } else {
                Safeguard::Off
            },
            ..Default::default()
        };
        let sub = (solver == "jgs2")
            .then(|| Arc::new(build_subspace(m, 0.01, &SubspaceOptions::node_fits()).unwrap()));
        let device = DeviceJgs2::new(gpu().unwrap(), m, params, sub).unwrap();
        let mut without = jello::sim::Simulation::new(
            m.clone()
                .with_inversion(jello::problem::InversionPolicy::Allow)
                .unwrap(),
            m.initial_state(&built.velocity),
            0.01,
            Box::new(device),
        )
        .unwrap();
        let (mut inverted_without, mut failed_without) = (0, false);
        for step in 1..=2 {
            let r = with.step(false).unwrap();
            let c = m.check_state(&with.state.x);
            eprintln!(
                "{solver} step {step}: {} it, substeps {}, failure {:?}, min J {:.2e}",
                r.iterations, r.substeps, r.failure, c.min_j
            );
            assert_eq!(c.total_inverted(), 0, "{solver} step {step}");
            assert!(c.min_j > 0.0);
            // Allowed: the device's steps end inverted (or fail outright: a vertex driven
            // onto the ground in f32 stops the run). Once a step has inverted elements, the
            // next adds nothing to check.
            if !failed_without && inverted_without == 0 {
                match without.step(false) {
                    Ok(r) => inverted_without += r.check.total_inverted(),
                    Err(e) => {
                        eprintln!("{solver} with inversion allowed: {e}");
                        failed_without = true;
                    }
                }
            }
        }
        eprintln!("{solver}: with inversion allowed, {inverted_without} inverted");
        assert!(
            inverted_without > 0 || failed_without,
            "{solver}: the impact must invert elements when allowed"
        );
    }
}

// ---------------------------------------------------------------- H-matrix far field

/// A clamped beam long enough for admissible blocks, and its subspace with the H-matrix far
/// field at ε = 1e-3.
fn hmatrix_case() -> (Model, jello::solver::jgs2::Jgs2Subspace) {
    let m = beam(MaterialModel::Arap, 1e5, [12, 2, 2], vec![]);
    let mut o = SubspaceOptions::node_fits();
    o.precompute.far_hmatrix = Some(jello_precompute::hmatrix::HMatrixOptions {
        eps: 1e-3,
        ..Default::default()
    });
    let sub = build_subspace(&m, 0.01, &o).unwrap();
    let far = sub.far_hmatrix.as_ref().unwrap();
    assert!(
        !far.matrix.blocks.is_empty() && !far.matrix.near_pairs.is_empty(),
        "the case needs far blocks and near pairs"
    );
    (m, sub)
}

/// Issue 17: the three H-matrix kernels' twins in sequence (forward, coupling, backward) against
/// the f64 far sum `hmatrix_far_field` (`HMatrix::apply_tree_order`, then S_i y_i − ĝ_i) on
/// random rest-frame gradients. Tolerance 1e-5 relative norm over all vertices: f32 data and
/// sums (ε = 6e-8) of up to a few hundred terms per output — the near rows of a leaf's pairs
/// and k_c terms per node up the tree — and S_i y_i − ĝ_i cancels S_i G_ii ĝ_i against ĝ_i, which
/// magnifies the rounding of y_i by ‖S_i‖‖G_ii‖ (measured 2.4e-7 overall; the bound leaves room
/// for other seeds and meshes, and is far below the field's own ε = 1e-3).
#[test]
fn hmatrix_twins_match_f64_reference() {
    use jello::solver::jgs2::{hmatrix_far_field, TreeFrame};
    let mut rng = common::rng("hmatrix_twins_match_f64_reference");
    let (m, sub) = hmatrix_case();
    let nv = m.num_vertices();
    let packed = DeviceJgs2::pack_hmatrix(&m, &sub).unwrap().unwrap();
    let nn = sub.tree.len();
    let far_base = nv + tw::NODE_STRIDE * nn;
    let ghat = rand_v4(&mut rng, nv, 5.0);
    let mut frame = ghat.clone();
    frame.resize(far_base + nv, [f32::NAN; 4]);
    let mut hw = vec![f32::NAN; 2 * packed.n_cols as usize];
    let perm = sub.tree.perm.clone();
    let nc = packed.n_cols;
    twins::jgs2_hm_forward(
        &Params {
            n: nc,
            ..Params::default()
        },
        &packed.blob,
        &perm,
        &frame,
        &mut hw,
    )
    .unwrap();
    twins::jgs2_hm_coupling(
        &Params {
            n: nc,
            u0: nc,
            ..Params::default()
        },
        &packed.blob,
        &mut hw,
    )
    .unwrap();
    twins::jgs2_hm_backward(
        &Params {
            n: packed.n_perm,
            u0: nc,
            u1: far_base as u32,
            ..Params::default()
        },
        &packed.blob,
        &perm,
        &hw,
        &mut frame,
    )
    .unwrap();
    let mut tf = TreeFrame {
        ghat: ghat
            .iter()
            .map(|g| Vector3::new(g[0] as f64, g[1] as f64, g[2] as f64))
            .collect(),
        ..Default::default()
    };
    hmatrix_far_field(&mut tf, &sub.tree, sub.far_hmatrix.as_ref().unwrap());
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for &v in &perm {
        let f = frame[far_base + v as usize];
        got.extend_from_slice(&f[..3]);
        want.extend(tf.far[v as usize].iter().map(|&x| x as f32));
    }
    assert_close(&got, &want, 1e-5, "H-matrix far sums, twins vs f64");
    // Pinned vertices (not in the tree) are not written.
    for v in (0..nv).filter(|&v| m.pinned[v]) {
        assert!(frame[far_base + v][0].is_nan(), "pinned vertex {v} written");
    }
}

/// The H-matrix kernels on the GPU against their twins, each on random inputs of its own (the
/// packed blob of a real subspace, random ĝ, random w and v). Tolerance 1e-5: the same f32
/// operations in the same order; the GPU may fuse multiply-adds (measured values printed).
#[test]
fn hmatrix_kernels_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("hmatrix_kernels_match_on_gpu");
    let (m, sub) = hmatrix_case();
    let nv = m.num_vertices();
    let packed = DeviceJgs2::pack_hmatrix(&m, &sub).unwrap().unwrap();
    let nc = packed.n_cols as usize;
    let far_base = nv + tw::NODE_STRIDE * sub.tree.len();
    let perm = sub.tree.perm.clone();
    let blob = D::U(packed.blob.clone());
    // Forward: w from random ĝ.
    let (cpu, gpu_out) = run_both(
        Kernel::Jgs2HmForward,
        &[
            blob.clone(),
            D::U(perm.clone()),
            D::V(rand_v4(&mut rng, nv, 5.0)),
            nan_f(2 * nc),
        ],
        Params::new(),
        nc as u32,
    );
    if let Some(g) = &gpu_out {
        compare_written(&cpu[3], &g[3], 1, 1e-5, "jgs2_hm_forward w");
    }
    assert!(
        cpu[3][..nc].iter().all(|x| x.is_finite()),
        "every w written"
    );
    // Coupling: v from random w.
    let mut hw: Vec<f32> = (0..nc).map(|_| rng.random_range(-1.0..1.0)).collect();
    hw.resize(2 * nc, f32::NAN);
    let (cpu, gpu_out) = run_both(
        Kernel::Jgs2HmCoupling,
        &[blob.clone(), D::F(hw)],
        Params::new().u0(nc as u32),
        nc as u32,
    );
    if let Some(g) = &gpu_out {
        compare_written(&cpu[1][nc..], &g[1][nc..], 1, 1e-5, "jgs2_hm_coupling v");
    }
    // Backward: far sums from random ĝ and v.
    let hw: Vec<f32> = (0..2 * nc).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut frame = rand_v4(&mut rng, nv, 5.0);
    frame.resize(far_base + nv, [f32::NAN; 4]);
    let (cpu, gpu_out) = run_both(
        Kernel::Jgs2HmBackward,
        &[blob, D::U(perm), D::F(hw), D::V(frame)],
        Params {
            u0: nc as u32,
            u1: far_base as u32,
            ..Params::default()
        },
        packed.n_perm,
    );
    if let Some(g) = &gpu_out {
        compare_written(
            &cpu[3][4 * far_base..],
            &g[3][4 * far_base..],
            4,
            1e-5,
            "jgs2_hm_backward far sums",
        );
    }
}

/// Issue 17: `DeviceJgs2` with an H-matrix subspace (CPU twins and GPU) against the f64
/// `Jgs2Solver` with the same subspace, over 3 steps of a swinging cantilever: every step
/// converges, iterations within the slack and positions within the bound of
/// `device_solvers_match_f64_on_a_cantilever` (1e-4 of the diagonal).
#[test]
fn device_hmatrix_jgs2_matches_f64() {
    let _gpu = gpu_lock();
    let (m, sub) = hmatrix_case();
    let sub = Arc::new(sub);
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    for (k, v) in state.v.iter_mut().enumerate() {
        if !m.pinned[k / 3] && k % 3 == 1 {
            *v = -2.0;
        }
    }
    let diag = bbox_diagonal(&m);
    for (variant, safeguard) in [
        (Variant::Jacobi, Safeguard::Cut),
        (Variant::Jacobi, Safeguard::Always),
        (Variant::GaussSeidel, Safeguard::Cut),
        (Variant::Jacobi, Safeguard::Off),
    ] {
        let params = Jgs2Params {
            stop: StopRule::Cn { eps: 1e-6 },
            max_iterations: 3000,
            variant,
            safeguard,
        };
        let mut reference = Jgs2Solver::jgs2(&m, params, sub.clone()).unwrap();
        let r = run_steps(&m, &mut reference, &state, 3);
        let mut devices: Vec<(&str, Device)> = vec![("cpu twins", Device::cpu())];
        if let Some(g) = gpu() {
            devices.push(("gpu", g));
        }
        for (dname, dev) in devices {
            let mut d = DeviceJgs2::new(dev, &m, params, Some(sub.clone())).unwrap();
            let run = run_steps(&m, &mut d, &state, 3);
            let worst = run
                .x
                .iter()
                .zip(&r.x)
                .map(|(a, b)| max_dev(a, b) / diag)
                .fold(0.0, f64::max);
            eprintln!(
                "H-matrix {} on {dname}: iterations {:?} (f64 {:?}), max deviation / diagonal \
                 {worst:.1e}",
                r.name, run.iterations, r.iterations
            );
            for (k, (&a, &b)) in run.iterations.iter().zip(&r.iterations).enumerate() {
                assert!(
                    a.abs_diff(b) <= 2 + b / 10,
                    "{} on {dname}, step {k}: {a} iterations vs {b} (f64)",
                    r.name
                );
            }
            assert!(
                worst <= 1e-4,
                "{} on {dname}: deviation {worst:e} of the diagonal from the f64 solver",
                r.name
            );
        }
    }
    // Converged runs agree whatever the far field (both reach the same minimiser), so one
    // plain Jacobi iteration shows the far sums themselves: the device's first iterate against
    // the f64 solver's, and against the f64 solver's without the far field (the same vertices,
    // `far_hmatrix` removed), which the device's must be far closer to the former than to.
    let one = Jgs2Params {
        stop: StopRule::Cn { eps: 1e-12 },
        max_iterations: 1,
        variant: Variant::Jacobi,
        safeguard: Safeguard::Off,
    };
    let first = |solver: &mut dyn StepSolver| {
        let problem = StepProblem::new(&m, &state, 0.01);
        let mut x = Vec::new();
        solver
            .step(&problem, &m as &dyn ElasticTerms, &mut x, false)
            .unwrap();
        x
    };
    let x_ref = first(&mut Jgs2Solver::jgs2(&m, one, sub.clone()).unwrap());
    let mut stripped = (*sub).clone();
    stripped.far_hmatrix = None;
    let x_near = first(&mut Jgs2Solver::jgs2(&m, one, Arc::new(stripped)).unwrap());
    let far_effect = max_dev(&x_near, &x_ref) / diag;
    let mut devices: Vec<(&str, Device)> = vec![("cpu twins", Device::cpu())];
    if let Some(g) = gpu() {
        devices.push(("gpu", g));
    }
    for (dname, dev) in devices {
        let x = first(&mut DeviceJgs2::new(dev, &m, one, Some(sub.clone())).unwrap());
        let dev_err = max_dev(&x, &x_ref) / diag;
        eprintln!(
            "one plain Jacobi iteration on {dname}: deviation {dev_err:.1e} of the diagonal \
             (without the far field: {far_effect:.1e})"
        );
        // f32 against f64 over one iteration: ~1e-7 relative; the far field moves the
        // iterate by orders of magnitude more.
        assert!(
            dev_err <= 1e-6 && dev_err < 1e-3 * far_effect,
            "{dname}: first iterate {dev_err:e} from f64, the far field's effect {far_effect:e}"
        );
    }
}

/// The H-matrix twins on corrupted blobs (random words overwritten with random or extreme
/// values): each returns a result or an error, never a panic (the CPU backend's contract; the
/// GPU would read clamped garbage, so the packer validates before upload).
#[test]
fn hmatrix_twins_refuse_corrupt_blobs_without_panicking() {
    let mut rng = common::rng("hmatrix_twins_refuse_corrupt_blobs_without_panicking");
    let (m, sub) = hmatrix_case();
    let nv = m.num_vertices();
    let packed = DeviceJgs2::pack_hmatrix(&m, &sub).unwrap().unwrap();
    let nc = packed.n_cols;
    let far_base = nv + tw::NODE_STRIDE * sub.tree.len();
    let perm = sub.tree.perm.clone();
    let mut refused = 0;
    for _ in 0..300 {
        let mut blob = packed.blob.clone();
        for _ in 0..rng.random_range(1..4) {
            // Mostly the structure (header, node and pair records, lists), sometimes anywhere.
            let span = if rng.random_bool(0.8) {
                blob.len().min(400)
            } else {
                blob.len()
            };
            let at = rng.random_range(0..span);
            blob[at] = match rng.random_range(0..3) {
                0 => u32::MAX - rng.random_range(0..3),
                1 => rng.random_range(0..64),
                _ => rng.random(),
            };
        }
        let mut frame = rand_v4(&mut rng, nv, 1.0);
        frame.resize(far_base + nv, [0.0; 4]);
        let mut hw = vec![0.0f32; 2 * nc as usize];
        let p = Params {
            n: nc,
            u0: nc,
            ..Params::default()
        };
        let results = [
            twins::jgs2_hm_forward(&p, &blob, &perm, &frame, &mut hw).is_err(),
            twins::jgs2_hm_coupling(&p, &blob, &mut hw).is_err(),
            twins::jgs2_hm_backward(
                &Params {
                    n: packed.n_perm,
                    u0: nc,
                    u1: far_base as u32,
                    ..Params::default()
                },
                &blob,
                &perm,
                &hw,
                &mut frame,
            )
            .is_err(),
        ];
        refused += results.iter().any(|&e| e) as usize;
    }
    eprintln!("{refused} of 300 corrupt blobs refused by a twin");
    assert!(refused > 0, "no corruption was ever detected");
}

/// Issue 17's cut safeguard on the device (CPU twins and GPU) against the f64 rule, on the
/// clamped beam of `tests/cpu/jgs2.rs` thrown gently (every plain step fits: the device keeps
/// them all, as the reference) and violently (the plain iteration diverges: the device's
/// plain trial is rejected, it re-evaluates the iterate and takes model steps to convergence):
/// iterations within the slack of the other device tests, positions within 1e-4 of the
/// bounding-box diagonal of the f64 solver's.
#[test]
fn device_safeguard_cut_keeps_plain_steps_and_falls_back_like_f64() {
    let _gpu = gpu_lock();
    let m = common::clamped_beam(MaterialModel::StableNeoHookean, 1e6, 0.5, [8, 2, 2], vec![]);
    let sub = Arc::new(build_subspace(&m, 0.01, &SubspaceOptions::default()).unwrap());
    let diag = bbox_diagonal(&m);
    let params = Jgs2Params {
        stop: StopRule::Cn { eps: 1e-6 },
        max_iterations: 300,
        variant: Variant::Jacobi,
        safeguard: Safeguard::Cut,
    };
    let step = |solver: &mut dyn StepSolver, v0: f64| {
        let mut st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
        for (k, v) in st.v.iter_mut().enumerate() {
            if !m.pinned[k / 3] && k % 3 == 1 {
                *v = -v0 * m.mesh.positions[k / 3][0];
            }
        }
        let problem = StepProblem::new(&m, &st, 0.01);
        let mut x = Vec::new();
        let r = solver
            .step(&problem, &m as &dyn ElasticTerms, &mut x, true)
            .unwrap();
        let t = r.trace.as_ref().unwrap();
        let models = t.iter().filter(|i| i.model_step == Some(true)).count();
        (r.iterations, r.converged, models, x)
    };
    for v0 in [10.0, 300.0] {
        let mut reference = Jgs2Solver::jgs2(&m, params, sub.clone()).unwrap();
        let (it_r, ok_r, models_r, x_r) = step(&mut reference, v0);
        assert!(ok_r);
        let mut devices: Vec<(&str, Device)> = vec![("cpu twins", Device::cpu())];
        if let Some(g) = gpu() {
            devices.push(("gpu", g));
        }
        for (dname, dev) in devices {
            let mut d = DeviceJgs2::new(dev, &m, params, Some(sub.clone())).unwrap();
            let (it, ok, models, x) = step(&mut d, v0);
            let dev_rel = max_dev(&x, &x_r) / diag;
            eprintln!(
                "v0 {v0} on {dname}: {it} iterations, {models} model steps (f64: {it_r}, \
                 {models_r}), deviation / diagonal {dev_rel:.1e}"
            );
            assert!(ok, "v0 {v0} on {dname}: not converged");
            assert!(
                it.abs_diff(it_r) <= 2 + it_r / 10,
                "v0 {v0} on {dname}: {it} iterations vs {it_r} (f64)"
            );
            if models_r == 0 {
                assert_eq!(models, 0, "v0 {v0} on {dname}: a plain step was rejected");
            } else {
                assert!(models > 0, "v0 {v0} on {dname}: the cut never fell back");
            }
            assert!(
                dev_rel <= 1e-4,
                "v0 {v0} on {dname}: deviation {dev_rel:e} of the diagonal"
            );
        }
        // The gentle throw keeps every plain step, the violent one falls back (the f64
        // test's finding on this beam), so both branches of the device loop ran above.
        assert_eq!(
            models_r == 0,
            v0 < 100.0,
            "v0 {v0}: f64 model steps {models_r}"
        );
    }
}
