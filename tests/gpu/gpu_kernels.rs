//! GPU-vs-CPU-twin regression tests for every kernel, plus twin-vs-f64-reference checks.
//!
//! Every test draws fresh random inputs (seed printed; replay with `JELLO_TEST_SEED=<seed>`),
//! poisons output buffers with NaN on both backends so unwritten entries show, and compares by
//! relative norm with tolerances justified next to each comparison. A GPU test FAILS when no
//! adapter is found unless `JELLO_SKIP_GPU_TESTS=1`.
//!
//! Run on both software stacks:
//!   WGPU_BACKEND=vulkan cargo test --test gpu gpu_kernels::   (Mesa lavapipe)
//!   WGPU_BACKEND=gl     cargo test --test gpu gpu_kernels::   (Mesa llvmpipe via EGL)

use crate::common;

use glam::{Mat3, Quat, Vec3};
use jello::gpu::twins::{self, linalg};
use jello::gpu::{
    Backend, Device, ElasticEvaluator, ElasticRest, ElemParams, EvalFlags, GpuMat3, GpuModel,
    GpuVec4, Kernel, Params, Plan, VertexCsr,
};
use jello::material::{
    element_hessian, element_hessian_filtered, EigenFilter, ElementRest, Material, MaterialModel,
};
use nalgebra::Vector3;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

// ---------------------------------------------------------------- harness

use common::gpu_device as gpu;
use common::kernels::{nan_f, nan_m, nan_v4, run_both, Data};
use common::{assert_close, rel_err};

fn randf(rng: &mut ChaCha8Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

// ---------------------------------------------------------------- meshes and deformations

/// A box of nx×ny×nz cubes (edge `h`), 6 positively oriented tets per cube (Freudenthal).
fn box_mesh(nx: usize, ny: usize, nz: usize, h: f64) -> (Vec<[f64; 3]>, Vec<[u32; 4]>) {
    let id = |i: usize, j: usize, k: usize| (i + (nx + 1) * (j + (ny + 1) * k)) as u32;
    let mut x = Vec::new();
    for k in 0..=nz {
        for j in 0..=ny {
            for i in 0..=nx {
                x.push([i as f64 * h, j as f64 * h, k as f64 * h]);
            }
        }
    }
    let perms = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut tets = Vec::new();
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                for p in perms {
                    let mut c = [i, j, k];
                    let mut t = [id(c[0], c[1], c[2]); 4];
                    for (s, &axis) in p.iter().enumerate() {
                        c[axis] += 1;
                        t[s + 1] = id(c[0], c[1], c[2]);
                    }
                    if signed_volume(&x, &t) < 0.0 {
                        t.swap(2, 3);
                    }
                    tets.push(t);
                }
            }
        }
    }
    (x, tets)
}

fn signed_volume(x: &[[f64; 3]], t: &[u32; 4]) -> f64 {
    let p = t.map(|i| Vector3::from(x[i as usize]));
    (p[1] - p[0]).dot(&(p[2] - p[0]).cross(&(p[3] - p[0]))) / 6.0
}

/// A random smooth deformation: rotation, anisotropic stretch, per-vertex noise; far from origin.
fn deform(rng: &mut ChaCha8Rng, x: &[[f64; 3]], noise: f64) -> Vec<f64> {
    let q = Quat::from_axis_angle(
        Vec3::new(rng.random(), rng.random(), rng.random::<f32>() + 0.1).normalize(),
        rng.random_range(0.0..6.0),
    );
    let s = [
        rng.random_range(0.7..1.4),
        rng.random_range(0.7..1.4),
        rng.random_range(0.7..1.4),
    ];
    let shift = [5.0, -3.0, 2.0];
    x.iter()
        .flat_map(|p| {
            let v = q.as_dquat() * glam::DVec3::new(p[0] * s[0], p[1] * s[1], p[2] * s[2]);
            let mut out = [0.0; 3];
            for k in 0..3 {
                out[k] = v[k] + shift[k] + rng.random_range(-noise..noise);
            }
            out
        })
        .collect()
}

fn random_materials(rng: &mut ChaCha8Rng, n: usize, allow_nh: bool) -> Vec<Material> {
    (0..n)
        .map(|_| {
            let models: &[MaterialModel] = if allow_nh {
                &MaterialModel::ALL
            } else {
                &[
                    MaterialModel::StableNeoHookean,
                    MaterialModel::StableNeoHookeanVbd,
                    MaterialModel::FixedCorotated,
                    MaterialModel::StVk,
                    MaterialModel::Arap,
                    MaterialModel::Linear,
                ]
            };
            let m = models[rng.random_range(0..models.len())];
            let e = 10f64.powf(rng.random_range(4.0..6.0));
            let nu = rng.random_range(0.2..0.45);
            Material::from_young_poisson(m, e, nu).unwrap()
        })
        .collect()
}

fn vec4s(x: &[f64]) -> Vec<GpuVec4> {
    x.chunks(3)
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect()
}

// ---------------------------------------------------------------- table

/// The generated table against an independent run-time reflection of the embedded, preprocessed
/// WGSL (naga via wgpu): catches a code generator that misreads naga, and a generated table out
/// of step with this checkout's shaders.
#[test]
fn kernel_table_matches_naga_reflection() {
    use jello::gpu::kernel::{Access, KERNELS};
    use jello::gpu::shaders;
    use wgpu::naga;
    assert_eq!(KERNELS.len(), Kernel::ALL.len());
    // Every shaders/*.wgsl is embedded and in the table.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".wgsl"))
                .map(String::from)
        })
        .collect();
    files.sort();
    let embedded: Vec<String> = shaders::names().map(String::from).collect();
    assert_eq!(files, embedded, "every shaders/*.wgsl is embedded, sorted");
    let mut in_table: Vec<String> = KERNELS.iter().map(|d| d.name.to_string()).collect();
    in_table.sort();
    assert_eq!(in_table, embedded, "every shader has a kernel-table entry");
    for (i, d) in KERNELS.iter().enumerate() {
        assert_eq!(d.kernel.index(), i, "table order");
        assert_eq!(Kernel::ALL[i], d.kernel, "ALL order");
        // The variant is the file stem in CamelCase.
        let camel: String = d
            .name
            .split('_')
            .map(|w| w[..1].to_uppercase() + &w[1..])
            .collect();
        assert_eq!(format!("{:?}", d.kernel), camel);
        let src = d.source();
        assert!(!src.contains("#import"), "{}: preprocessed", d.name);
        let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| {
            panic!("{}: {}", d.name, e.emit_to_string(src));
        });
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", d.name, e.emit_to_string(src)));
        let eps: Vec<_> = module
            .entry_points
            .iter()
            .filter(|e| e.stage == naga::ShaderStage::Compute)
            .collect();
        assert_eq!(eps.len(), 1, "{}: one compute entry point", d.name);
        assert_eq!(eps[0].name, "main");
        assert_eq!(eps[0].workgroup_size, d.workgroup_size, "{}", d.name);
        let mut storage = Vec::new();
        let mut uniforms = Vec::new();
        for (_, gv) in module.global_variables.iter() {
            let Some(rb) = &gv.binding else { continue };
            match gv.space {
                naga::AddressSpace::Storage { access } => {
                    assert_eq!(rb.group, 0, "{}: storage in group 0", d.name);
                    let naga::TypeInner::Array { stride, .. } = module.types[gv.ty].inner else {
                        panic!("{}: storage binding {} is not an array", d.name, rb.binding);
                    };
                    let rw = access.contains(naga::StorageAccess::STORE);
                    storage.push((rb.binding, gv.name.clone().unwrap(), rw, stride));
                }
                naga::AddressSpace::Uniform => uniforms.push((rb.group, rb.binding)),
                _ => panic!("{}: unexpected resource", d.name),
            }
        }
        storage.sort();
        assert_eq!(storage.len(), d.bindings.len(), "{}: binding count", d.name);
        for (k, ((binding, name, rw, stride), bd)) in storage.iter().zip(d.bindings).enumerate() {
            assert_eq!(*binding, k as u32, "{}: bindings must be 0..n", d.name);
            assert_eq!(name, bd.name, "{}: binding {k}", d.name);
            assert_eq!(
                *rw,
                bd.access == Access::ReadWrite,
                "{}: access of `{name}`",
                d.name
            );
            assert_eq!(
                *stride, bd.elem_bytes,
                "{}: element size of `{name}`",
                d.name
            );
        }
        assert_eq!(
            uniforms,
            [(1, 0)],
            "{}: params at group 1 binding 0",
            d.name
        );
        assert!(
            d.bindings.len() <= 8,
            "{}: Limits::default() allows 8 storage buffers",
            d.name
        );
        let wg: u32 = d.workgroup_size.iter().product();
        assert!(wg <= 256, "{}: ≤ 256 invocations", d.name);
        // One item per invocation, four (the block reductions), or one per workgroup (kernels
        // whose workgroup cooperates on one item, e.g. `ml_restrict`'s handle).
        assert!(
            d.items_per_group == wg || d.items_per_group == wg * 4 || d.items_per_group == 1,
            "{}: items per group {} vs workgroup {wg}",
            d.name,
            d.items_per_group
        );
    }
}

#[test]
fn backend_parses() {
    assert_eq!("auto".parse::<Backend>().unwrap(), Backend::Auto);
    assert_eq!("GPU".parse::<Backend>().unwrap(), Backend::Gpu);
    assert_eq!("cpu".parse::<Backend>().unwrap(), Backend::Cpu);
    assert!("metal".parse::<Backend>().is_err());
}

// ---------------------------------------------------------------- vector kernels

#[test]
fn axpy_and_scale_match() {
    let mut rng = common::rng("axpy_and_scale_match");
    let n = 10_000 + rng.random_range(0..3000);
    let x = randf(&mut rng, n, 10.0);
    let y = randf(&mut rng, n, 10.0);
    let a: f32 = rng.random_range(-3.0..3.0);
    // Exact reference in f64; one f32 FMA-or-not rounding per entry: 1e-6 relative.
    let exact: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| (a as f64 * *x as f64 + *y as f64) as f32)
        .collect();
    let (cpu, gpu) = run_both(
        Kernel::Axpy,
        &[Data::F(x.clone()), Data::F(y.clone())],
        Params::new().f0(a),
        n as u32,
    );
    assert_close(&cpu[1], &exact, 1e-6, "axpy cpu vs f64");
    if let Some(g) = gpu {
        assert_close(&g[1], &cpu[1], 1e-6, "axpy gpu vs cpu");
    }
    let (cpu, gpu) = run_both(
        Kernel::Scale,
        &[Data::F(x.clone())],
        Params::new().f0(a),
        n as u32,
    );
    let exact: Vec<f32> = x.iter().map(|v| a * v).collect();
    assert_close(&cpu[0], &exact, 1e-7, "scale cpu vs exact");
    if let Some(g) = gpu {
        assert_close(&g[0], &cpu[0], 1e-7, "scale gpu vs cpu");
    }
}

/// `copy_vec4` (the GPU bench's streaming reference) copies exactly: every lane of the first
/// n vec4s, nothing past n (the output's tail keeps its NaN poison).
#[test]
fn copy_vec4_matches() {
    let mut rng = common::rng("copy_vec4_matches");
    let n = 10_000 + rng.random_range(0..3000);
    let x = randf(&mut rng, 4 * (n + 5), 10.0);
    let xv: Vec<GpuVec4> = x
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let y = vec![[f32::NAN; 4]; n + 5];
    let (cpu, gpu) = run_both(
        Kernel::CopyVec4,
        &[Data::V(xv.clone()), Data::V(y)],
        Params::new(),
        n as u32,
    );
    let want: Vec<f32> = xv[..n].iter().flatten().copied().collect();
    for (what, out) in std::iter::once(("cpu", cpu)).chain(gpu.map(|g| ("gpu", g))) {
        assert_eq!(out[1][..4 * n], want[..], "copy_vec4 {what}: copied values");
        assert!(
            out[1][4 * n..].iter().all(|v| v.is_nan()),
            "copy_vec4 {what}: wrote past n"
        );
    }
}

#[test]
fn reductions_match() {
    let mut rng = common::rng("reductions_match");
    // > 1024² items would need three passes; 300k needs two (293 partials).
    let n = 300_000 + rng.random_range(0..5000);
    let a = randf(&mut rng, n, 1.0);
    let b = randf(&mut rng, n, 1.0);
    let sum64: f64 = a.iter().map(|&v| v as f64).sum();
    let dot64: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let abs_sum: f64 = a.iter().map(|&v| v.abs() as f64).sum();
    let abs_dot: f64 = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| (x as f64 * y as f64).abs())
        .sum();
    let max64 = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    let mut results = Vec::new();
    for dev in devs.iter_mut() {
        let ab = dev.upload("a", &a).unwrap();
        let bb = dev.upload("b", &b).unwrap();
        let s = dev.sum(&ab, n as u32).unwrap() as f64;
        let d = dev.dot(&ab, &bb, n as u32).unwrap() as f64;
        let m = dev.max_abs(&ab, n as u32).unwrap();
        let nrm = dev.norm(&ab, n as u32).unwrap() as f64;
        let nrm64 = a.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt();
        assert!(
            (nrm - nrm64).abs() <= 1e-5 * nrm64,
            "{}: norm {nrm} vs {nrm64}",
            dev.info()
        );
        // f32 tree sums: error ≤ ~(4 + log2 n)·ε·Σ|terms| ≈ 2.5e-6·Σ|terms|; allow 1e-5.
        assert!(
            (s - sum64).abs() <= 1e-5 * abs_sum,
            "{}: sum {s} vs {sum64}",
            dev.info()
        );
        assert!(
            (d - dot64).abs() <= 1e-5 * abs_dot,
            "{}: dot {d} vs {dot64}",
            dev.info()
        );
        assert_eq!(m, max64, "{}: max-abs is exact", dev.info());
        results.push((s, d));
    }
    if results.len() == 2 {
        // Same tree, same order: GPU and twin differ only by FMA contraction in the dot.
        assert!(
            (results[0].0 - results[1].0).abs() <= 1e-6 * abs_sum,
            "sum gpu vs cpu"
        );
        assert!(
            (results[0].1 - results[1].1).abs() <= 1e-6 * abs_dot,
            "dot gpu vs cpu"
        );
    }
}

#[test]
fn plan_records_many_steps_in_one_submit() {
    let mut rng = common::rng("plan_records_many_steps_in_one_submit");
    let n = 5000 + rng.random_range(0..100);
    let x = randf(&mut rng, n, 1.0);
    let y = randf(&mut rng, n, 1.0);
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    let mut outs = Vec::new();
    for dev in devs.iter_mut() {
        let xb = dev.upload("x", &x).unwrap();
        let yb = dev.upload("y", &y).unwrap();
        let zb = dev.alloc::<f32>("z", n).unwrap();
        let out = dev.upload("out", &[f32::NAN; 4]).unwrap();
        let mut p = Plan::new();
        p.copy(&yb, 0, &zb, 0, n) // z = y
            .dispatch(
                Kernel::Axpy,
                &[xb.id(), zb.id()],
                Params::new().f0(2.0),
                n as u32,
            ) // z = 2x + y
            .dispatch(Kernel::Scale, &[zb.id()], Params::new().f0(0.5), n as u32) // z = x + y/2
            .dot(&zb, &zb, n as u32, &out, 0)
            .sum(&zb, n as u32, &out, 1)
            .max_abs(&zb, n as u32, &out, 2)
            .sum(&xb, 0, &out, 3); // empty sum = 0
        dev.submit(&p).unwrap();
        outs.push(dev.read(&out).unwrap());
    }
    let z: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| a as f64 + 0.5 * b as f64)
        .collect();
    let dot: f64 = z.iter().map(|v| v * v).sum();
    let sum: f64 = z.iter().sum();
    let abs_sum: f64 = z.iter().map(|v| v.abs()).sum();
    let max = z.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for o in &outs {
        assert!(
            (o[0] as f64 - dot).abs() <= 1e-5 * dot,
            "dot {} vs {dot}",
            o[0]
        );
        assert!(
            (o[1] as f64 - sum).abs() <= 1e-5 * abs_sum,
            "sum {} vs {sum}",
            o[1]
        );
        assert!(
            (o[2] as f64 - max).abs() <= 1e-6 * max,
            "max {} vs {max}",
            o[2]
        );
        assert_eq!(o[3], 0.0);
    }
}

// ---------------------------------------------------------------- F and SVD

/// Random F with controlled singular values: rotations × diag(σ) × rotations, covering inverted,
/// near-degenerate (σ ~ 1e-4) and repeated-σ cases.
fn random_f(rng: &mut ChaCha8Rng) -> Mat3 {
    let rot = |rng: &mut ChaCha8Rng| {
        Mat3::from_quat(
            Quat::from_xyzw(
                rng.random(),
                rng.random(),
                rng.random(),
                rng.random::<f32>() + 0.01,
            )
            .normalize(),
        )
    };
    let kind = rng.random_range(0..8);
    let mut s = Vec3::new(
        rng.random_range(0.2..3.0),
        rng.random_range(0.2..3.0),
        rng.random_range(0.2..3.0),
    );
    match kind {
        1 => s.z = -s.z,                         // inverted
        2 => s.z = rng.random_range(1e-4..1e-3), // near-degenerate
        3 => s.y = s.x,                          // repeated
        4 => s = Vec3::splat(s.x) * Vec3::new(1.0, 1.0, if rng.random() { -1.0 } else { 1.0 }),
        5 => s.z = 0.0,                                    // singular (flat element)
        6 => s = Vec3::new(s.x, 0.0, 0.0),                 // rank one
        7 => s *= 10f32.powf(rng.random_range(-3.0..3.0)), // tiny or huge scale
        _ => {}
    }
    rot(rng) * Mat3::from_diagonal(s) * rot(rng)
}

#[test]
fn svd3_matches_and_reconstructs() {
    let mut rng = common::rng("svd3_matches_and_reconstructs");
    let n = 4000;
    let fs: Vec<GpuMat3> = (0..n)
        .map(|_| GpuMat3::from_glam(random_f(&mut rng)))
        .collect();
    let data = [Data::M(fs.clone()), nan_m(n), nan_v4(n), nan_m(n)];
    let (cpu, gpu) = run_both(Kernel::Svd3, &data, Params::new(), n as u32);
    let mut sets = vec![("cpu", cpu)];
    if let Some(g) = gpu {
        sets.push(("gpu", g));
    }
    for (name, out) in &sets {
        for e in 0..n {
            let u = m3(&out[1][12 * e..12 * e + 12]);
            let v = m3(&out[3][12 * e..12 * e + 12]);
            let s = Vec3::new(out[2][4 * e], out[2][4 * e + 1], out[2][4 * e + 2]);
            let f = fs[e].to_glam();
            let fnorm = frob(f);
            // Jacobi + Givens in f32: a few ε·‖F‖ per entry; 2e-5·‖F‖ leaves margin.
            let rec = u * Mat3::from_diagonal(s) * v.transpose();
            assert!(
                frob(rec - f) <= 2e-5 * fnorm,
                "{name} elem {e}: reconstruction error {}",
                frob(rec - f) / fnorm
            );
            assert!(
                frob(u.transpose() * u - Mat3::IDENTITY) < 1e-5,
                "{name} elem {e}: U not orthonormal"
            );
            assert!(
                frob(v.transpose() * v - Mat3::IDENTITY) < 1e-5,
                "{name} elem {e}: V not orthonormal"
            );
            assert!(
                u.determinant() > 0.0 && v.determinant() > 0.0,
                "{name} elem {e}: rotations"
            );
            assert!(
                s.x >= s.y - 1e-6 * fnorm && s.y >= s.z.abs() - 1e-6 * fnorm,
                "{name} elem {e}: order {s}"
            );
            // The sign of σ₃ is only defined when det F is not lost in rounding.
            let det = f.determinant();
            assert!(
                det.abs() <= 1e-5 * fnorm.powi(3) || (s.z < 0.0) == (det < 0.0),
                "{name} elem {e}: sign of σ₃ vs det F"
            );
        }
    }
    if sets.len() == 2 {
        // σ are unique (U, V are not for repeated σ): compare σ per element, relative to ‖F‖
        // (scales span 1e-3..1e3): 1e-5.
        let (g, c) = (&sets[1].1[2], &sets[0].1[2]);
        let mut worst = 0.0f32;
        for e in 0..n {
            let fnorm = frob(fs[e].to_glam()).max(1e-30);
            for k in 0..3 {
                worst = worst.max((g[4 * e + k] - c[4 * e + k]).abs() / fnorm);
            }
        }
        eprintln!("svd σ gpu vs cpu: worst per-element error {worst:.2e} ‖F‖ (tolerance 1e-5)");
        assert!(worst <= 1e-5, "svd σ gpu vs cpu: {worst:.3e}");
    }
}

fn m3(c: &[f32]) -> Mat3 {
    Mat3::from_cols(
        Vec3::new(c[0], c[1], c[2]),
        Vec3::new(c[4], c[5], c[6]),
        Vec3::new(c[8], c[9], c[10]),
    )
}
fn frob(m: Mat3) -> f32 {
    (m.x_axis.length_squared() + m.y_axis.length_squared() + m.z_axis.length_squared()).sqrt()
}

#[test]
fn deformation_gradient_matches() {
    let mut rng = common::rng("deformation_gradient_matches");
    let (x0, tets) = box_mesh(6, 5, 4, 0.1);
    let x = deform(&mut rng, &x0, 0.01);
    let rest: Vec<ElementRest<f64>> = tets
        .iter()
        .map(|t| ElementRest::new(&t.map(|i| x0[i as usize])).unwrap())
        .collect();
    let dm: Vec<GpuMat3> = rest.iter().map(dm_gpu).collect();
    let ne = tets.len();
    let data = [
        Data::V(vec4s(&x)),
        Data::T(tets.clone()),
        Data::M(dm),
        nan_m(ne),
    ];
    let (cpu, gpu) = run_both(Kernel::DeformationGradient, &data, Params::new(), ne as u32);
    // f64 reference.
    let mut exact = Vec::new();
    for (t, r) in tets.iter().zip(&rest) {
        let p = t.map(|i| {
            Vector3::new(
                x[3 * i as usize],
                x[3 * i as usize + 1],
                x[3 * i as usize + 2],
            )
        });
        let f = r.deformation_gradient(&p);
        for c in 0..3 {
            exact.extend([f[(0, c)] as f32, f[(1, c)] as f32, f[(2, c)] as f32, 0.0]);
        }
    }
    // Positions ~5 m from the origin with 0.1 m edges: f32 rounding of x is ~5e-7 m, i.e. ~1e-5
    // relative on an edge; the GPU and twin share that rounding, the f64 reference does not.
    assert_close(&cpu[3], &exact, 5e-5, "F cpu vs f64");
    if let Some(g) = gpu {
        assert_close(&g[3], &cpu[3], 1e-6, "F gpu vs cpu");
    }
}

fn dm_gpu(r: &ElementRest<f64>) -> GpuMat3 {
    let d = r.dm_inv;
    GpuMat3::from_rows([
        [d[(0, 0)] as f32, d[(0, 1)] as f32, d[(0, 2)] as f32],
        [d[(1, 0)] as f32, d[(1, 1)] as f32, d[(1, 2)] as f32],
        [d[(2, 0)] as f32, d[(2, 1)] as f32, d[(2, 2)] as f32],
    ])
}

// ---------------------------------------------------------------- elastic

struct ElasticCase {
    x: Vec<GpuVec4>,
    xf64: Vec<f64>,
    tets: Vec<[u32; 4]>,
    rest: Vec<ElementRest<f64>>,
    mats: Vec<Material>,
    ep: Vec<ElemParams>,
}

/// A 480-tet box (edge 0.05 m) under a random rotation/stretch plus per-vertex noise of
/// amplitude `noise` (m); noise ≳ 0.025 inverts a fair share of the elements.
fn elastic_case(rng: &mut ChaCha8Rng, allow_nh: bool, noise: f64) -> ElasticCase {
    let (x0, tets) = box_mesh(5, 4, 4, 0.05);
    // Positions relative to a point near the body, as the evaluator uploads them.
    let mut x = deform(rng, &x0, noise);
    for (i, v) in x.iter_mut().enumerate() {
        *v -= [5.0, -3.0, 2.0][i % 3];
    }
    let rest: Vec<ElementRest<f64>> = tets
        .iter()
        .map(|t| ElementRest::new(&t.map(|i| x0[i as usize])).unwrap())
        .collect();
    let mats = random_materials(rng, tets.len(), allow_nh);
    let ep = rest
        .iter()
        .zip(&mats)
        .map(|(r, m)| ElemParams {
            mu: m.mu as f32,
            lambda: m.lambda as f32,
            volume: r.volume as f32,
            model: GpuModel::from_material(m.model) as u32,
        })
        .collect();
    ElasticCase {
        x: vec4s(&x),
        xf64: x,
        tets,
        rest,
        mats,
        ep,
    }
}

#[test]
fn elastic_matches_twin_on_gpu() {
    let mut rng = common::rng("elastic_matches_twin_on_gpu");
    for (noise, flags, label) in [
        (0.008, 1 | 2 | 4, "mild, projected"),
        (0.008, 1 | 2, "mild, unprojected"),
        (0.03, 1 | 2 | 4, "strong with inversions, projected"),
        (0.03, 1 | 2 | 16, "strong with inversions, abs filter"),
        (
            0.03,
            1 | 2 | 4 | twins::ELASTIC_EXACT_SNH,
            "strong with inversions, stable Neo-Hookeans exact",
        ),
    ] {
        let c = elastic_case(&mut rng, true, noise);
        let ne = c.tets.len();
        let dm: Vec<GpuMat3> = c.rest.iter().map(dm_gpu).collect();
        let inverted = c
            .tets
            .iter()
            .filter(|t| {
                let p = t
                    .map(|i| Vec3::new(c.x[i as usize][0], c.x[i as usize][1], c.x[i as usize][2]));
                (p[1] - p[0]).dot((p[2] - p[0]).cross(p[3] - p[0])) < 0.0
            })
            .count();
        eprintln!("{label}: {inverted} of {ne} elements inverted");
        {
            let data = [
                Data::V(c.x.clone()),
                Data::T(c.tets.clone()),
                Data::M(dm.clone()),
                Data::E(c.ep.clone()),
                nan_f(ne),
                nan_v4(4 * ne),
                nan_f(144 * ne),
            ];
            let (cpu, gpu) = run_both(Kernel::Elastic, &data, Params::new().u0(flags), ne as u32);
            let Some(g) = gpu else { return };
            // Inverted Neo-Hookean elements are +∞ / NaN on both sides: compare that pattern, then
            // the finite elements.
            let bad: Vec<bool> = (0..ne).map(|e| cpu[4][e].is_infinite()).collect();
            for e in 0..ne {
                assert_eq!(
                    bad[e],
                    g[4][e].is_infinite(),
                    "element {e}: ∞ energy pattern"
                );
            }
            // Energies: twin and GPU run the same f32 formulas; differences come from the SVD's
            // rounding (σ to ~1e-6 relative) amplified by λ/μ ≤ ~10: 1e-5.
            // Gradients: P = U·diag(ψ')·Vᵀ adds U/V rounding (~1e-6) on top of the energy's: 2e-5.
            // Hessians: the flip/twist eigenvalues divide by σ_i + σ_j, and near-repeated σ make
            // U, V ill-determined (the Hessian is invariant, its rounding is not); inverted
            // elements sit closest to those cases. Observed ≤ 3e-6 over 24 seeds on lavapipe and
            // llvmpipe-GL; 1e-4 leaves room for other drivers' FMA contraction.
            // All three hold over the well-conditioned elements (σ_max/σ_min ≤ 100). A nearly
            // flat element is different: Neo-Hookean's ψ carries ln J, P carries μ F⁻ᵀ and
            // λ ln J F⁻ᵀ, its Hessian F⁻ᵀ ⊗ F⁻ᵀ, whose relative sensitivity to one f32 ulp of F
            // is ~ε·σ_max/σ_min, and such an element's terms can dominate a global norm (seed
            // 1795567016154484731: σ_min = 1.6e-4, condition 9.8e3, gradient error 5.3e-5 and
            // Hessian error 1.4e-4 over all elements; seed 135: energy error 2.1e-5). So each
            // of those elements is held to its own bound instead: the base tolerance
            // + 4ε·condition. (No failure over seeds 100–400 on lavapipe and llvmpipe-GL.)
            let cond: Vec<f64> = (0..ne)
                .map(|e| {
                    let p = c.tets[e].map(|i| {
                        let i = 3 * i as usize;
                        Vector3::new(c.xf64[i], c.xf64[i + 1], c.xf64[i + 2])
                    });
                    let s = c.rest[e].deformation_gradient(&p).singular_values();
                    s.max() / s.min().max(1e-300)
                })
                .collect();
            for (slot, k, tol, what) in [
                (4, 1, 1e-5, "energy"),
                (5, 16, 2e-5, "gradient"),
                (6, 144, 1e-4, "hessian"),
            ] {
                let well = |e: &usize| !bad[*e] && cond[*e] <= 100.0;
                let pick = |v: &[f32]| -> Vec<f32> {
                    (0..ne)
                        .filter(well)
                        .flat_map(|e| v[k * e..k * e + k].to_vec())
                        .collect()
                };
                assert_close(
                    &pick(&g[slot]),
                    &pick(&cpu[slot]),
                    tol,
                    &format!("elastic {what}, condition ≤ 100 ({label})"),
                );
                let ill: Vec<usize> = (0..ne).filter(|&e| !bad[e] && cond[e] > 100.0).collect();
                let mut worst: Option<(f64, usize, f64)> = None;
                for &e in &ill {
                    let r = k * e..k * e + k;
                    let err = rel_err(&g[slot][r.clone()], &cpu[slot][r], "element");
                    let bound = tol + 4.0 * f32::EPSILON as f64 * cond[e];
                    assert!(
                        err <= bound,
                        "elastic {what} ({label}), element {e} (condition {:.2e}): relative \
                         error {err:.3e} > {bound:.2e}",
                        cond[e]
                    );
                    if worst.is_none_or(|w| err / bound > w.0 / w.2) {
                        worst = Some((err, e, bound));
                    }
                }
                if let Some((err, e, bound)) = worst {
                    eprintln!(
                        "elastic {what}, {} elements of condition > 100 ({label}): closest to \
                         its bound is element {e} (condition {:.2e}), relative error {err:.2e}, \
                         bound {bound:.2e}",
                        ill.len(),
                        cond[e]
                    );
                }
            }
        }
    }
}

#[test]
fn elastic_twin_matches_f64_reference() {
    // The f32 twin against crate::material (f64, nalgebra SVD, generic difference quotients):
    // an independent implementation of the same formulas.
    let mut rng = common::rng("elastic_twin_matches_f64_reference");
    // `exact`: the ELASTIC_EXACT_SNH flag, under which the stable Neo-Hookeans are unfiltered.
    for (noise, filter, exact) in [
        (0.008, EigenFilter::Clamp, false),
        (0.03, EigenFilter::Clamp, false),
        (0.03, EigenFilter::Abs, false),
        (0.03, EigenFilter::Clamp, true),
    ] {
        let c = elastic_case(&mut rng, false, noise);
        let ne = c.tets.len();
        let dm: Vec<GpuMat3> = c.rest.iter().map(dm_gpu).collect();
        let mut energy = vec![f32::NAN; ne];
        let mut grad = vec![[f32::NAN; 4]; 4 * ne];
        let mut hess = vec![f32::NAN; 144 * ne];
        let p = Params {
            n: ne as u32,
            u0: match filter {
                EigenFilter::Clamp => 1 | 2 | twins::ELASTIC_PROJECT,
                EigenFilter::Abs => 1 | 2 | twins::ELASTIC_ABS,
            } | if exact { twins::ELASTIC_EXACT_SNH } else { 0 },
            ..Params::new()
        };
        twins::elastic(
            &p,
            &c.x,
            &c.tets,
            &dm,
            &c.ep,
            &mut energy,
            &mut grad,
            &mut hess,
        )
        .unwrap();
        let (mut e64, mut g64, mut h64) = (Vec::new(), Vec::new(), Vec::new());
        let (mut e32, mut g32, mut h32) = (Vec::new(), Vec::new(), Vec::new());
        let mut skipped = 0;
        for e in 0..ne {
            let t = c.tets[e];
            let p = t.map(|i| {
                Vector3::new(
                    c.xf64[3 * i as usize],
                    c.xf64[3 * i as usize + 1],
                    c.xf64[3 * i as usize + 2],
                )
            });
            let f = c.rest[e].deformation_gradient(&p);
            let s = f.svd(false, false).singular_values;
            // Skip elements within 1e-2 of a repeated |σ| pair or a vanishing σ, where the f64
            // reference switches to its limit formulas and the f32 closed forms differ by design
            // (inverted elements are compared: signed σ₃ < 0).
            let mut ss: Vec<f64> = s.iter().copied().collect();
            ss.sort_by(|a, b| b.partial_cmp(a).unwrap());
            if ss.windows(2).any(|w| (w[0] - w[1]).abs() < 1e-2) || ss[2] < 1e-2 {
                skipped += 1;
                continue;
            }
            let snh = matches!(
                c.mats[e].model,
                MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd
            );
            let filter = if exact && snh { None } else { Some(filter) };
            let r = element_hessian_filtered(&c.mats[e], &c.rest[e], &p, filter);
            e64.push(r.energy as f32);
            e32.push(energy[e]);
            for a in 0..4 {
                for (k, gk) in grad[4 * e + a][..3].iter().enumerate() {
                    g64.push(r.gradient[3 * a + k] as f32);
                    g32.push(*gk);
                }
            }
            let h = r.hessian.unwrap();
            for i in 0..12 {
                for j in 0..12 {
                    h64.push(h[(i, j)] as f32);
                    h32.push(hess[144 * e + 12 * i + j]);
                }
            }
        }
        eprintln!(
            "compared {} elements, skipped {skipped} near-degenerate",
            ne - skipped
        );
        assert!(skipped < ne / 2, "deformation too degenerate to test");
        // f32 positions (~1e-7 relative, ×~10 through F = Ds·Dm⁻¹ since |x| ≈ 10·edge here) and
        // the stiff λ terms (λ/μ up to 9, J − α cancellation near rest): a few 1e-6 relative;
        // observed ≤ 1.3e-6 over 24 seeds, tolerance 5e-5.
        assert_close(&e32, &e64, 5e-5, "twin energy vs f64");
        assert_close(&g32, &g64, 5e-5, "twin gradient vs f64");
        assert_close(
            &h32,
            &h64,
            5e-5,
            &format!("twin hessian vs f64 ({})", filter.name()),
        );
    }
}

// ---------------------------------------------------------------- gathers and inertia

#[test]
fn gathers_match() {
    let mut rng = common::rng("gathers_match");
    let (x0, tets) = box_mesh(7, 6, 5, 1.0);
    let nv = x0.len();
    let ne = tets.len();
    let csr = VertexCsr::new(&tets, nv).unwrap();
    let eg: Vec<GpuVec4> = (0..4 * ne)
        .map(|_| {
            [
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                0.0,
            ]
        })
        .collect();
    let eh = randf(&mut rng, 144 * ne, 1.0);
    // f64 scatter reference.
    let mut g64 = vec![0.0f64; 3 * nv];
    let mut h64 = vec![0.0f64; 9 * nv];
    for (e, t) in tets.iter().enumerate() {
        for (l, &v) in t.iter().enumerate() {
            for k in 0..3 {
                g64[3 * v as usize + k] += eg[4 * e + l][k] as f64;
                for c in 0..3 {
                    h64[9 * v as usize + 3 * c + k] +=
                        eh[144 * e + (3 * l + k) * 12 + 3 * l + c] as f64;
                }
            }
        }
    }
    let csr_data = |a: Data| {
        vec![
            a,
            Data::U(csr.offsets.clone()),
            Data::U(csr.tets.clone()),
            Data::U(csr.local.clone()),
        ]
    };
    let mut d = csr_data(Data::V(eg));
    d.push(nan_v4(nv));
    let (cpu, gpu) = run_both(Kernel::GatherGradient, &d, Params::new(), nv as u32);
    let cpu3: Vec<f32> = cpu[4].chunks(4).flat_map(|v| v[..3].to_vec()).collect();
    let exact: Vec<f32> = g64.iter().map(|&v| v as f32).collect();
    // ≤ 24 f32 additions per vertex: ~1e-6 relative.
    assert_close(&cpu3, &exact, 1e-6, "gather gradient cpu vs f64");
    if let Some(g) = gpu {
        assert_close(&g[4], &cpu[4], 1e-6, "gather gradient gpu vs cpu");
    }
    let mut d = csr_data(Data::F(eh));
    d.push(nan_m(nv));
    let (cpu, gpu) = run_both(Kernel::GatherHessianDiag, &d, Params::new(), nv as u32);
    let cpu9: Vec<f32> = cpu[4].chunks(4).flat_map(|v| v[..3].to_vec()).collect();
    let exact: Vec<f32> = h64.iter().map(|&v| v as f32).collect();
    assert_close(&cpu9, &exact, 1e-6, "gather hessian diag cpu vs f64");
    if let Some(g) = gpu {
        assert_close(&g[4], &cpu[4], 1e-6, "gather hessian diag gpu vs cpu");
    }
}

#[test]
fn inertia_matches() {
    let mut rng = common::rng("inertia_matches");
    let nv = 3000 + rng.random_range(0..100);
    let x: Vec<GpuVec4> = (0..nv)
        .map(|_| [rng.random(), rng.random(), rng.random(), 0.0])
        .collect();
    let xt: Vec<GpuVec4> = (0..nv)
        .map(|_| [rng.random(), rng.random(), rng.random(), 0.0])
        .collect();
    let m: Vec<f32> = (0..nv).map(|_| rng.random_range(0.01..1.0)).collect();
    let g0: Vec<GpuVec4> = (0..nv)
        .map(|_| [rng.random(), rng.random(), rng.random(), 7.0])
        .collect();
    let inv_h2 = 1.0f32 / (0.01 * 0.01);
    let data = [
        Data::V(x.clone()),
        Data::V(xt.clone()),
        Data::F(m.clone()),
        Data::V(g0.clone()),
        nan_f(nv),
    ];
    let (cpu, gpu) = run_both(Kernel::Inertia, &data, Params::new().f0(inv_h2), nv as u32);
    let mut eg = Vec::new();
    let mut ee = Vec::new();
    for v in 0..nv {
        let k = m[v] as f64 * inv_h2 as f64;
        let d: Vec<f64> = (0..3).map(|i| x[v][i] as f64 - xt[v][i] as f64).collect();
        for i in 0..3 {
            eg.push((g0[v][i] as f64 + k * d[i]) as f32);
        }
        eg.push(7.0); // w is preserved
        ee.push((0.5 * k * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2])) as f32);
    }
    assert_close(&cpu[3], &eg, 1e-6, "inertia gradient cpu vs f64");
    assert_close(&cpu[4], &ee, 1e-6, "inertia energy cpu vs f64");
    if let Some(g) = gpu {
        assert_close(&g[3], &cpu[3], 1e-6, "inertia gradient gpu vs cpu");
        assert_close(&g[4], &cpu[4], 1e-6, "inertia energy gpu vs cpu");
    }
}

// ---------------------------------------------------------------- evaluator

#[test]
fn evaluator_matches_f64_and_across_backends() {
    let mut rng = common::rng("evaluator_matches_f64_and_across_backends");
    let (x0, tets) = box_mesh(4, 3, 3, 0.1);
    let nv = x0.len();
    let rest: Vec<ElementRest<f64>> = tets
        .iter()
        .map(|t| ElementRest::new(&t.map(|i| x0[i as usize])).unwrap())
        .collect();
    let mats = random_materials(&mut rng, tets.len(), false);
    let masses: Vec<f64> = (0..nv).map(|_| rng.random_range(0.1..1.0)).collect();
    let x = deform(&mut rng, &x0, 0.005);
    let xt: Vec<f64> = x
        .iter()
        .map(|v| v + rng.random_range(-0.01..0.01))
        .collect();
    let h = 1.0 / 60.0;
    let origin = [5.0, -3.0, 2.0];
    let setup = ElasticRest {
        num_vertices: nv,
        tets: &tets,
        rest: &rest,
        materials: &mats,
        masses: &masses,
        origin,
    };
    // f64 reference.
    let mut e_ref = 0.0;
    let mut g_ref = vec![0.0; 3 * nv];
    for (e, t) in tets.iter().enumerate() {
        let p = t.map(|i| {
            Vector3::new(
                x[3 * i as usize],
                x[3 * i as usize + 1],
                x[3 * i as usize + 2],
            )
        });
        let r = element_hessian(&mats[e], &rest[e], &p, true);
        e_ref += r.energy;
        for (a, &v) in t.iter().enumerate() {
            for k in 0..3 {
                g_ref[3 * v as usize + k] += r.gradient[3 * a + k];
            }
        }
    }
    for v in 0..3 * nv {
        let m = masses[v / 3] / (h * h);
        e_ref += 0.5 * m * (x[v] - xt[v]).powi(2);
        g_ref[v] += m * (x[v] - xt[v]);
    }
    let mut results = Vec::new();
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    for dev in devs {
        let name = dev.info().to_string();
        let mut ev = ElasticEvaluator::new(dev, &setup).unwrap();
        let flags = EvalFlags {
            hessian_diagonal: true,
            ..EvalFlags::newton()
        };
        let r = ev.evaluate(&x, &xt, h, flags).unwrap();
        assert_eq!(r.gradient.len(), 3 * nv);
        assert_eq!(r.element_hessians.len(), tets.len());
        // The gathered diagonal blocks equal the sums of the returned element Hessians' blocks.
        let mut diag = vec![[0.0f64; 9]; nv];
        for (t, he) in tets.iter().zip(&r.element_hessians) {
            for (l, &v) in t.iter().enumerate() {
                for i in 0..9 {
                    diag[v as usize][i] += he[(3 * l + i / 3) * 12 + 3 * l + i % 3] as f64;
                }
            }
        }
        let a: Vec<f32> = r
            .vertex_hessian_diagonal
            .iter()
            .flatten()
            .map(|&v| v as f32)
            .collect();
        let b: Vec<f32> = diag.iter().flatten().map(|&v| v as f32).collect();
        assert_close(&a, &b, 1e-6, &format!("{name}: evaluator hessian diagonal"));
        // f32 element energies (~1e-6 relative each, see above) summed in f64 from f32 block
        // partials: 1e-4 relative on the total energy; gradient observed ≤ 2e-6, tolerance 5e-5.
        assert!(
            (r.energy - e_ref).abs() <= 1e-4 * e_ref.abs().max(1e-12),
            "{name}: energy {} vs {e_ref}",
            r.energy
        );
        let gf: Vec<f32> = r.gradient.iter().map(|&v| v as f32).collect();
        let gr: Vec<f32> = g_ref.iter().map(|&v| v as f32).collect();
        assert_close(
            &gf,
            &gr,
            5e-5,
            &format!("{name}: evaluator gradient vs f64"),
        );
        let eo = ev.evaluate(&x, &xt, h, EvalFlags::energy_only()).unwrap();
        assert!(
            (eo.energy - r.energy).abs() <= 1e-6 * r.energy.abs(),
            "{name}: energy-only path"
        );
        assert!(eo.gradient.is_empty() && eo.element_hessians.is_empty());
        let bad = EvalFlags {
            hessian: false,
            hessian_diagonal: true,
            ..EvalFlags::default()
        };
        assert!(ev.evaluate(&x, &xt, h, bad).is_err());
        assert!(ev.evaluate(&x[1..], &xt, h, EvalFlags::default()).is_err());
        assert!(ev.evaluate(&x, &xt, 0.0, EvalFlags::default()).is_err());
        assert_eq!(ev.positions_buffer().is_some(), ev.device().is_gpu());
        results.push(r);
    }
    if results.len() == 2 {
        let a: Vec<f32> = results[1].gradient.iter().map(|&v| v as f32).collect();
        let b: Vec<f32> = results[0].gradient.iter().map(|&v| v as f32).collect();
        assert_close(&a, &b, 2e-5, "evaluator gradient gpu vs cpu");
        let ha: Vec<f32> = results[1]
            .element_hessians
            .iter()
            .flatten()
            .copied()
            .collect();
        let hb: Vec<f32> = results[0]
            .element_hessians
            .iter()
            .flatten()
            .copied()
            .collect();
        assert_close(&ha, &hb, 1e-4, "evaluator hessians gpu vs cpu");
    }
}

// ---------------------------------------------------------------- errors

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    for mut dev in devs {
        let a = dev.alloc::<f32>("a", 10).unwrap();
        let b = dev.alloc::<f32>("b", 5).unwrap();
        // Too short for n = 10.
        assert!(dev
            .dispatch(Kernel::Axpy, &[a.id(), b.id()], Params::new(), 10)
            .is_err());
        // Wrong count and element size.
        assert!(dev
            .dispatch(Kernel::Axpy, &[a.id()], Params::new(), 5)
            .is_err());
        let t = dev.alloc::<[u32; 4]>("t", 10).unwrap();
        assert!(dev
            .dispatch(Kernel::Axpy, &[t.id(), a.id()], Params::new(), 5)
            .is_err());
        // Writable aliasing.
        assert!(dev
            .dispatch(Kernel::Axpy, &[a.id(), a.id()], Params::new(), 5)
            .is_err());
        // Writes and reads out of range.
        assert!(dev.write(&a, 8, &[1.0f32; 3]).is_err());
        assert!(dev.read_range(&a, 5..11).is_err());
        // Freed buffer.
        dev.free(b);
        assert!(dev
            .dispatch(Kernel::Axpy, &[a.id(), b.id()], Params::new(), 5)
            .is_err());
        // Evaluator with inconsistent data.
        let tets = [[0u32, 1, 2, 9]];
        let rest =
            [
                ElementRest::new(&[[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
                    .unwrap(),
            ];
        let mats = [Material::new(MaterialModel::Arap, 1.0, 0.0).unwrap()];
        let setup = ElasticRest {
            num_vertices: 4,
            tets: &tets,
            rest: &rest,
            materials: &mats,
            masses: &[1.0; 4],
            origin: [0.0; 3],
        };
        assert!(ElasticEvaluator::new(dev, &setup).is_err());
    }
    // Out-of-range tet index reaching the twin directly.
    let p = Params {
        n: 1,
        ..Params::new()
    };
    let mut f = [GpuMat3::default()];
    assert!(twins::deformation_gradient(
        &p,
        &[[0.0; 4]; 3],
        &[[0, 1, 2, 3]],
        &[GpuMat3::default()],
        &mut f
    )
    .is_err());
    // A buffer beyond the device's storage-binding limit is a Gpu error, not a panic or abort.
    if let Some(mut g) = gpu() {
        let too_big = g
            .as_gpu()
            .unwrap()
            .device()
            .limits()
            .max_storage_buffer_binding_size as usize
            / 4
            + 1;
        match g.alloc::<f32>("too big", too_big) {
            Err(jello::JelloError::Gpu(m)) => eprintln!("oversized buffer: {m}"),
            other => panic!("expected a Gpu error, got {other:?}"),
        }
    }
    // sanity: the twin's sym_eig3 diagonalises
    let m = Mat3::from_cols(
        Vec3::new(2.0, 1.0, 0.0),
        Vec3::new(1.0, 3.0, 0.5),
        Vec3::new(0.0, 0.5, 1.0),
    );
    let e = linalg::sym_eig3(m);
    let rec = e.vectors * Mat3::from_diagonal(e.values) * e.vectors.transpose();
    assert!(frob(rec - m) < 1e-5);
}

// ---------------------------------------------------------------- adapters and adoption

#[test]
fn adapters_are_listed_and_reported() {
    let Some(dev) = gpu() else { return };
    let list = jello::gpu::list_adapters();
    let text = list.to_string();
    eprintln!("{text}");
    assert!(
        !list.0.is_empty(),
        "a device exists, so the list cannot be empty"
    );
    assert!(
        text.contains(&dev.info().name),
        "the chosen adapter appears in the listing"
    );
    assert!(list
        .0
        .iter()
        .all(|a| a.limits.max_storage_buffers_per_shader_stage >= 4));
    assert_eq!(Device::cpu().info().backend, "cpu");
}

#[test]
fn adopts_a_host_device_without_owning_it() {
    // The host creates its own device and queue.
    let Some(adapter) = common::host_adapter() else {
        return;
    };
    let (device, queue) =
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor::default())).unwrap();
    let mut dev = Device::from_wgpu(device.clone(), queue.clone()).unwrap();
    assert!(!dev.as_gpu().unwrap().owns_device());
    let a = dev.upload("a", &[1.0f32, 2.0, 3.0]).unwrap();
    let b = dev.upload("b", &[10.0f32, 20.0, 30.0]).unwrap();
    dev.dispatch(Kernel::Axpy, &[a.id(), b.id()], Params::new().f0(2.0), 3)
        .unwrap();
    assert_eq!(dev.read(&b).unwrap(), vec![12.0, 24.0, 36.0]);
    // The host can bind an engine buffer directly (e.g. positions as a vertex buffer).
    let raw = dev.as_gpu().unwrap().buffer(b.id()).unwrap();
    assert!(raw
        .usage()
        .contains(wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::STORAGE));
    drop(dev);
    // The host's device is still alive and usable after the engine is gone.
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&buf, 0, &[0u8; 16]);
    queue.submit([]);
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
}

#[test]
fn rest_state_is_stress_free_for_every_model() {
    // Through Model and ElasticRest::from_model: at rest (x = x̃ = X) every model has Ψ(I) = 0
    // and P(I) = 0, so energy and gradient must vanish up to f32 rounding — relative to the
    // gradient of a 1 % stretch, which is O(μ·ε·area).
    let mut rng = common::rng("rest_state_is_stress_free_for_every_model");
    let (x0, tets) = box_mesh(3, 3, 2, 0.1);
    let shift = [rng.random_range(-10.0..10.0), 3.0, -7.0];
    let positions: Vec<[f64; 3]> = x0
        .iter()
        .map(|p| [p[0] + shift[0], p[1] + shift[1], p[2] + shift[2]])
        .collect();
    let backends: Vec<Backend> = match gpu() {
        Some(_) => vec![Backend::Cpu, Backend::Gpu],
        None => vec![Backend::Cpu],
    };
    for backend in backends {
        for model in MaterialModel::ALL {
            let dev = Device::new(backend).unwrap();
            let name = dev.info().to_string();
            let mesh = jello::mesh::TetMesh {
                positions: positions.clone(),
                tets: tets.clone(),
            };
            let nt = mesh.num_tets();
            let mat = Material::from_young_poisson(model, 1e5, 0.4).unwrap();
            let m = jello::problem::Model::new(
                mesh,
                vec![],
                vec![mat; nt],
                vec![1000.0; nt],
                [0.0; 3],
                vec![],
                vec![],
                jello::problem::BarrierParams {
                    dhat: 1e-3,
                    kappa: 1.0,
                },
            )
            .unwrap();
            let setup = ElasticRest::from_model(&m);
            let mut ev = ElasticEvaluator::new(dev, &setup).unwrap();
            let x: Vec<f64> = positions.iter().flatten().copied().collect();
            let r = ev.evaluate(&x, &x, 0.01, EvalFlags::default()).unwrap();
            let stretched: Vec<f64> = x
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if i % 3 == 0 {
                        v + 0.01 * (v - shift[0])
                    } else {
                        *v
                    }
                })
                .collect();
            let s = ev
                .evaluate(&stretched, &stretched, 0.01, EvalFlags::default())
                .unwrap();
            let gmax = |g: &[f64]| g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            eprintln!("{name} {model:?}: rest |g|∞ = {:.2e}, stretched |g|∞ = {:.2e}, rest E = {:.2e}, stretched E = {:.2e}", gmax(&r.gradient), gmax(&s.gradient), r.energy, s.energy);
            assert!(
                s.energy > 0.0 && gmax(&s.gradient) > 0.0,
                "{name} {model:?}: a stretch stores energy"
            );
            // f32 F at rest is I ± ~1e-6 (positions relative to the centroid): P(I ± δ) ~ δ·μ,
            // i.e. ~1e-4 of the 1 % stretch's gradient; the energy is second order: ~1e-8 of it.
            assert!(
                gmax(&r.gradient) <= 1e-3 * gmax(&s.gradient),
                "{name} {model:?}: rest gradient"
            );
            assert!(
                r.energy.abs() <= 1e-4 * s.energy,
                "{name} {model:?}: rest energy {}",
                r.energy
            );
        }
    }
}
