//! The device CCD kernels (`ipc_ccd`, `ipc_vertex_toi`; `jello::gpu::twins::ccd`): the GPU
//! against the f32 twins, and both against an exact time-of-impact reference, on fresh random
//! inputs every run (seed printed; replay with JELLO_TEST_SEED).
//!
//! The adversarial set is the f64 ACCD's (`tests/contact_common/ccd_cases.rs`: 7,830
//! point–triangle and 8,430 edge–edge trajectories — grazing, through edges and corners,
//! crossing, (nearly) parallel, sliding at a tiny gap, zero and rigid motion, starts at ξ). The
//! kernel sees f32 start positions and f32 displacements, so the trajectory it must be
//! conservative for is the exact linear motion of those f32 values: the reference time of
//! impact is computed (in f64, exactly as for the CPU test) on that rounded trajectory. Asserted
//! for every case, GPU and twin: t ∈ [0, 1], t ≤ the true time of impact (zero false
//! negatives), the pair at t farther than ξ (f64 distance), and no relative motion returning 1
//! when the start is clear of ξ by far more than the rounding bound. Reported: t over the f64
//! ACCD's t on the same rounded trajectory (how much shorter f32 is) and over the true time.
//!
//! GPU vs twin: the kernel mirrors the twin operation for operation, but WGSL's division and
//! sqrt are not correctly rounded (2.5 ulp) and GL contracts to FMA, and ACCD's stopping test
//! (gap < (1 − η)·gap₀) is a threshold: an ulp can move a pair's stop by one advance. So times
//! are compared per pair within their rounding scale ([`AGREE`]), and the few pairs whose
//! iteration counts differ are counted and bounded (figures next to the constants). Half the
//! adversarial cases are moved up to 3 m from the origin (the position-rounding bound).

use crate::common;
use crate::contact_common;

use common::kernels::{nan_f, run_both, Data};
use contact_common::ccd_cases::{cases, Case, KINDS_EE, KINDS_PT};
use contact_common::{rand_point, V3};
use jello::contact::ccd::{additive_ccd, AccdParams, PairKind};
use jello::gpu::twins::ccd::{ROUND, UNCERTIFIED, VERTEX_TOI_GROUP};
use jello::gpu::{GpuPair, GpuVec4, Kernel, Params, VertexCsr};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Iteration cap of the "sliding at gap" kind (as in the CPU test), and of the rest.
const CAP_SLIDING: u32 = 10_000;
const CAP: u32 = 1_000_000;
/// η of the runs (the CPU default).
const ETA: f32 = 0.9;
/// GPU and twin times with equal iteration counts agree within AGREE·k·C·L/l_p (`agreement`):
/// each of the k advances is η·gap/l_p, and two evaluations of the same gap bound differ by at
/// most their rounding (≲ C·L, C = twins::ccd::ROUND, L the pair's size; the twin docs). Bit for
/// bit on lavapipe; on llvmpipe-GL (FMA contraction) measured ≤ 0.07 (printed).
const AGREE: f64 = 1.0;
/// At most this fraction of pairs may stop at a different advance on the GPU than in the twin.
const STOP_FLIPS: f64 = 0.01;

/// The rounding scale of a pair's time after `iters` advances: iters·C·L/l_p (see [`AGREE`]),
/// L the largest vertex distance at the start or end, l_p ACCD's Lipschitz bound (f64).
fn agreement(start: &[V3; 4], end: &[V3; 4], pt: bool, iters: u32) -> f64 {
    let mut size = 0.0f64;
    for x in [start, end] {
        for i in 0..4 {
            for j in 0..i {
                size = size.max((x[i] - x[j]).norm());
            }
        }
    }
    let d = [0, 1, 2, 3].map(|k| end[k] - start[k]);
    let m = (d[0] + d[1] + d[2] + d[3]) / 4.0;
    let split = if pt { 1 } else { 2 };
    let top = |r: std::ops::Range<usize>| r.map(|k| (d[k] - m).norm()).fold(0.0, f64::max);
    let lp = top(0..split) + top(split..4);
    (iters.max(1) as f64 * ROUND as f64 * size / lp).max(f64::MIN_POSITIVE)
}

fn f32v(v: &V3) -> GpuVec4 {
    [v.x as f32, v.y as f32, v.z as f32, 0.0]
}

fn f64v(v: &GpuVec4) -> V3 {
    V3::new(v[0] as f64, v[1] as f64, v[2] as f64)
}

/// The case as the kernel sees it: f32 starts, f32 displacements, and the exact linear motion
/// of those values (end = start + displacement in f64, exact for these magnitudes).
fn rounded(case: &Case, offset: V3) -> (Case, [GpuVec4; 4], [GpuVec4; 4]) {
    let x = case.start.map(|p| f32v(&(p + offset)));
    let dx = [0, 1, 2, 3].map(|k| f32v(&(case.end[k] - case.start[k])));
    let start = x.map(|p| f64v(&p));
    let end = [0, 1, 2, 3].map(|k| start[k] + f64v(&dx[k]));
    (
        Case {
            start,
            end,
            ..case.clone()
        },
        x,
        dx,
    )
}

/// The cases' vertices scattered over a shuffled buffer (so the kernel's indexing is exercised),
/// their pairs, and (twin, GPU) times and iteration counts under cap `cap` and separation per
/// case — one dispatch per distinct ξ.
fn run_ccd(
    rng: &mut ChaCha8Rng,
    cases: &[(Case, [GpuVec4; 4], [GpuVec4; 4])],
    cap: u32,
) -> Vec<[(f32, u32); 2]> {
    let mut out = vec![[(f32::NAN, 0u32); 2]; cases.len()];
    let mut xis: Vec<f64> = cases.iter().map(|c| c.0.xi).collect();
    xis.sort_by(f64::total_cmp);
    xis.dedup();
    for xi in xis {
        let idx: Vec<usize> = (0..cases.len()).filter(|&i| cases[i].0.xi == xi).collect();
        let n = idx.len();
        let mut slots: Vec<u32> = (0..4 * n as u32).collect();
        slots.shuffle(rng);
        let mut x = vec![[0.0f32; 4]; 4 * n];
        let mut dx = vec![[0.0f32; 4]; 4 * n];
        let pairs: Vec<GpuPair> = idx
            .iter()
            .enumerate()
            .map(|(j, &i)| {
                let v = [0, 1, 2, 3].map(|k| slots[4 * j + k]);
                for k in 0..4 {
                    x[v[k] as usize] = cases[i].1[k];
                    dx[v[k] as usize] = cases[i].2[k];
                }
                if cases[i].0.pt {
                    GpuPair::point_triangle(v[0], [v[1], v[2], v[3]])
                } else {
                    GpuPair::edge_edge([v[0], v[1]], [v[2], v[3]], 1e-3)
                }
            })
            .collect();
        let params = Params {
            f0: xi as f32,
            f1: 1.0,
            f2: ETA,
            ..Params::new().u0(cap)
        };
        let data = [
            Data::V(x),
            Data::V(dx),
            Data::P(pairs),
            nan_f(n),
            Data::U(vec![u32::MAX; n]),
        ];
        let (cpu, gpu) = run_both(Kernel::IpcCcd, &data, params, n as u32);
        let gpu = gpu.unwrap_or_else(|| cpu.clone());
        for (j, &i) in idx.iter().enumerate() {
            out[i] = [&cpu, &gpu].map(|r| (r[3][j], r[4][j].to_bits()));
        }
    }
    out
}

/// Per-family report and assertions; returns (t / t_f64 ratios, pairs whose stops differ).
fn check_family(rng: &mut ChaCha8Rng, pt: bool) {
    let family = if pt {
        "point–triangle"
    } else {
        "edge–edge"
    };
    let drawn = cases(rng, pt, if pt { &KINDS_PT } else { &KINDS_EE });
    // Half the cases away from the origin (positions are relative to the engine's origin; the
    // kernel's position-rounding bound grows with ‖x‖).
    let all: Vec<_> = drawn
        .iter()
        .map(|c| {
            let far = rng.random_bool(0.5);
            rounded(
                c,
                if far {
                    rand_point(rng, 3.0)
                } else {
                    V3::zeros()
                },
            )
        })
        .collect();
    let (sliding, rest): (Vec<_>, Vec<_>) =
        all.into_iter().partition(|c| c.0.kind == "sliding at gap");
    let mut results = run_ccd(rng, &rest, CAP);
    results.extend(run_ccd(rng, &sliding, CAP_SLIDING));
    let all: Vec<_> = rest.into_iter().chain(sliding).collect();
    let kind = if pt {
        PairKind::PointTriangle
    } else {
        PairKind::EdgeEdge
    };
    let (mut vs_f64, mut vs_true) = (Vec::new(), Vec::new());
    let (mut fp32, mut fp64, mut flips, mut capped) = (0, 0, 0, 0);
    let mut worst = 0.0f64;
    let mut zero_kinds = std::collections::BTreeMap::new();
    for ((case, _, _), res) in all.iter().zip(&results) {
        // A start within ξ (rounding can put an "at separation" start there) is an impact at 0;
        // the reference's scan assumes a clear start.
        let reference = if case.touching(0.0) {
            Some(0.0)
        } else {
            case.reference_toi()
        };
        let t_true = reference.unwrap_or(1.0);
        let cap = if case.kind == "sliding at gap" {
            CAP_SLIDING
        } else {
            CAP
        };
        for (who, &(t, _)) in ["twin", "GPU"].iter().zip(res) {
            assert!(
                (0.0..=1.0).contains(&t) && (t as f64) <= t_true,
                "{who}: false negative: t = {t} after the true impact at {reference:?}: {case:?}"
            );
            if t > 0.0 {
                let d = case.dist(t as f64);
                assert!(
                    d > case.xi,
                    "{who}: t = {t} ends at distance {d:e} ≤ ξ = {:e}: {case:?}",
                    case.xi
                );
            }
            let clear = case.dist(0.0) > case.xi + 1e-3;
            if clear && (case.kind == "zero motion" || case.kind == "rigid motion") {
                assert_eq!(
                    t, 1.0,
                    "{who}: no relative motion must not stop the step: {case:?}"
                );
            }
        }
        let [(tc, ic), (tg, ig)] = *res;
        if ic != ig {
            flips += 1;
        } else {
            let diff =
                (tc as f64 - tg as f64).abs() / agreement(&case.start, &case.end, case.pt, ic);
            assert!(
                diff <= AGREE,
                "GPU t = {tg} vs twin t = {tc} (both {ic} iterations, {diff:.2} of the rounding \
                 scale): {case:?}"
            );
            worst = worst.max(diff);
        }
        capped += (ig == cap) as usize;
        let f64_t = additive_ccd(
            kind,
            &case.start,
            &case.end,
            case.xi,
            1.0,
            &AccdParams {
                rescaling: ETA as f64,
                max_iterations: cap as usize,
            },
        )
        .t;
        if reference.is_none() {
            fp32 += (tg < 1.0) as usize;
            fp64 += (f64_t < 1.0) as usize;
        }
        if f64_t > 1e-9 && f64_t < 1.0 {
            vs_f64.push(tg as f64 / f64_t);
            if tg == 0.0 {
                *zero_kinds.entry(case.kind).or_insert(0usize) += 1;
            }
        }
        if let Some(tt) = reference.filter(|&tt| tt > 1e-9) {
            vs_true.push(tg as f64 / tt);
        }
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
        format!(
            "min {:.4} 1% {:.4} 10% {:.4} median {:.4} max {:.4} ({} pairs, {} at 0)",
            q(0.0),
            q(0.01),
            q(0.1),
            q(0.5),
            q(1.0),
            v.len(),
            v.iter().filter(|&&r| r == 0.0).count()
        )
    };
    println!("{family} ipc_ccd (η = {ETA}), {} cases:", all.len());
    println!(
        "  t_f32 / t_f64 ACCD (same rounded trajectory): {}",
        stats(&mut vs_f64)
    );
    println!(
        "  t_f32 / t_true:                               {}",
        stats(&mut vs_true)
    );
    println!("  t_f32 = 0 where the f64 ACCD advances, by kind: {zero_kinds:?}");
    println!("  false positives (impact reported, none true): f32 {fp32}, f64 {fp64}");
    println!(
        "  GPU vs twin: {flips} pairs stop at a different advance, the rest within {worst:.2} of \
         k·C·L/l_p; {capped} GPU searches ended by the iteration cap"
    );
    assert!(
        flips as f64 <= STOP_FLIPS * all.len() as f64,
        "{flips} of {} pairs stop differently on the GPU",
        all.len()
    );
}

#[test]
fn ipc_ccd_never_passes_the_true_impact() {
    let mut rng = common::rng("ipc_ccd_never_passes_the_true_impact");
    check_family(&mut rng, true);
    check_family(&mut rng, false);
}

/// A random soup: `nv` vertices in a 2 m box moving up to `speed` m, and `np` pairs over
/// distinct random vertex quadruples (so vertices belong to many pairs).
fn soup(
    rng: &mut ChaCha8Rng,
    nv: usize,
    np: usize,
    speed: f32,
) -> (Vec<GpuVec4>, Vec<GpuVec4>, Vec<GpuPair>) {
    let mut p = || [0, 1, 2].map(|_| rng.random_range(-1.0f32..1.0));
    let x: Vec<GpuVec4> = (0..nv)
        .map(|_| {
            let q = p();
            [q[0], q[1], q[2], 0.0]
        })
        .collect();
    let dx: Vec<GpuVec4> = (0..nv)
        .map(|_| {
            let q = p();
            [speed * q[0], speed * q[1], speed * q[2], 0.0]
        })
        .collect();
    let pairs = (0..np)
        .map(|_| contact_common::random_gpu_pair(rng, nv))
        .collect();
    (x, dx, pairs)
}

#[test]
fn ipc_vertex_toi_is_the_minimum_over_each_vertexs_pairs() {
    let mut rng = common::rng("ipc_vertex_toi_is_the_minimum_over_each_vertexs_pairs");
    let nv = 700 + rng.random_range(0..100);
    let np = 3000 + rng.random_range(0..200);
    let (x, dx, pairs) = soup(&mut rng, nv, np, 0.5);
    let xi = 1e-3f32;
    let t_max = rng.random_range(0.5f32..1.0);
    let params = Params {
        f0: xi,
        f1: t_max,
        f2: ETA,
        ..Params::new().u0(CAP)
    };
    let data = [
        Data::V(x.clone()),
        Data::V(dx.clone()),
        Data::P(pairs.clone()),
        nan_f(np),
        Data::U(vec![u32::MAX; np]),
    ];
    let (cpu, gpu) = run_both(Kernel::IpcCcd, &data, params, np as u32);
    let twin_toi = cpu[3].clone();
    let mut flips = 0;
    if let Some(g) = &gpu {
        for i in 0..np {
            if cpu[4][i].to_bits() != g[4][i].to_bits() {
                flips += 1;
                continue;
            }
            let (a, b) = (cpu[3][i], g[3][i]);
            let start = pairs[i].v.map(|v| f64v(&x[v as usize]));
            let end = [0, 1, 2, 3].map(|k| start[k] + f64v(&dx[pairs[i].v[k] as usize]));
            let pt = pairs[i].kind == GpuPair::POINT_TRIANGLE;
            let diff =
                (a as f64 - b as f64).abs() / agreement(&start, &end, pt, cpu[4][i].to_bits());
            assert!(diff <= AGREE, "pair {i}: GPU t = {b}, twin {a} ({diff:.2})");
        }
        assert!(
            flips as f64 <= STOP_FLIPS * np as f64,
            "{flips} of {np} pairs stop differently"
        );
    }
    // Each soup pair against its exact time of impact (f64 reference).
    let mut impacts = 0;
    for (i, pr) in pairs.iter().enumerate() {
        let start = pr.v.map(|v| f64v(&x[v as usize]));
        let case = Case {
            kind: "soup",
            pt: pr.kind == GpuPair::POINT_TRIANGLE,
            start,
            end: [0, 1, 2, 3].map(|k| start[k] + f64v(&dx[pr.v[k] as usize])),
            xi: xi as f64,
        };
        let t = twin_toi[i];
        if case.touching(0.0) {
            // Starts within ξ (the reference's scan assumes a clear start).
            assert_eq!(t, 0.0, "pair {i} starts within ξ: {case:?}");
        } else {
            let t_true = case.reference_toi().unwrap_or(1.0).min(t_max as f64);
            assert!(
                t as f64 <= t_true && t <= t_max,
                "pair {i}: t = {t} > true {t_true}: {case:?}"
            );
        }
        impacts += (t < t_max) as usize;
    }
    // Per-vertex minima: the kernel over the CSR against a direct scan of the pairs, on the
    // soup's times and on random ones (the soup always has a pair starting within ξ, so its
    // global minimum is 0 and exercises only the 1e-30 floor).
    let csr = VertexCsr::from_pairs(&pairs, nv).unwrap();
    let random: Vec<f32> = (0..np).map(|_| rng.random_range(1e-3f32..1.0)).collect();
    let mut globals = Vec::new();
    for pair_toi in [twin_toi.clone(), random] {
        globals.push(check_vertex_toi(&mut rng, &pairs, &csr, nv, &pair_toi));
    }
    println!(
        "soup: {np} pairs, {impacts} impacts before t_max = {t_max}, {flips} GPU/twin stop \
         differences; global minima {globals:?}"
    );
}

/// Runs `ipc_vertex_toi` on `pair_toi` over the CSR and checks the per-vertex minima against a
/// direct scan of the pairs and the global minimum through `reduce_max_abs`; returns the
/// global minimum.
fn check_vertex_toi(
    rng: &mut ChaCha8Rng,
    pairs: &[GpuPair],
    csr: &VertexCsr,
    nv: usize,
    pair_toi: &[f32],
) -> f32 {
    let f0 = rng.random_range(0.5f32..1.0);
    let groups = nv.div_ceil(VERTEX_TOI_GROUP);
    let vdata = [
        Data::F(pair_toi.to_vec()),
        Data::U(csr.offsets.clone()),
        Data::U(csr.tets.clone()),
        nan_f(nv),
        nan_f(groups),
    ];
    let (vc, vg) = run_both(
        Kernel::IpcVertexToi,
        &vdata,
        Params::new().f0(f0),
        nv as u32,
    );
    let mut expect = vec![f0; nv];
    for (i, pr) in pairs.iter().enumerate() {
        for &v in &pr.v {
            expect[v as usize] = expect[v as usize].min(pair_toi[i]);
        }
    }
    let global = expect.iter().copied().fold(f32::INFINITY, f32::min);
    // The partials hold reciprocals of max(t, 1e-30) (kernel contract).
    let floored = global.max(1e-30);
    for (who, r) in [("twin", Some(&vc)), ("GPU", vg.as_ref())] {
        let Some(r) = r else { continue };
        assert_eq!(r[3], expect, "{who}: per-vertex minima");
        let (rc, rg) = run_both(
            Kernel::ReduceMaxAbs,
            &[Data::F(r[4].clone()), nan_f(1)],
            Params::new(),
            groups as u32,
        );
        for m in std::iter::once(&rc).chain(rg.as_ref()) {
            let t = 1.0 / m[1][0];
            assert!(
                (t - floored).abs() <= 4.0 * f32::EPSILON * floored,
                "{who}: global minimum 1/M = {t}, the minimum is {global}"
            );
        }
    }
    global
}

/// `ipc_trust` (the device IPC step filter's trust boxes; `jello::gpu::twins::trust`): per
/// vertex the largest α ≤ 1 keeping x + α·step in the vertex's box, against the exact ratio in
/// f64 on the same f32 inputs — never above it, never more than 2e-6 (relative) below it (the 8ε shrink and the f32 ratio's rounding), and
/// the moved point inside the box in f64 — its reciprocal folded into `bound` by max, and the
/// per-group maximum reciprocals. GPU and twin agree to 1e-6 relative (a WGSL division is
/// within 2.5 ulp; the twin's is exact-rounded).
#[test]
fn ipc_trust_keeps_each_move_in_its_box() {
    use jello::gpu::twins::trust::TRUST_GROUP;
    let mut rng = common::rng("ipc_trust_keeps_each_move_in_its_box");
    let n = 1000 + rng.random_range(0..200);
    let mut x = Vec::with_capacity(n);
    let mut step = Vec::with_capacity(n);
    let mut boxes = Vec::with_capacity(2 * n);
    for v in 0..n {
        let p: [f32; 3] = std::array::from_fn(|_| rng.random_range(-2.0f32..2.0));
        let (lo, hi) = if v % 7 == 0 {
            // An interior vertex: unbounded.
            ([-f32::MAX; 3], [f32::MAX; 3])
        } else {
            (
                p.map(|c| c - rng.random_range(0.0f32..0.1)),
                p.map(|c| c + rng.random_range(0.0f32..0.1)),
            )
        };
        // Zero steps, steps with zero components, small (inside) and large (leaving) moves.
        let scale = [0.0, 0.01, 0.3, 30.0][v % 4];
        let d: [f32; 3] = std::array::from_fn(|k| {
            if (v / 4 + k) % 5 == 0 {
                0.0
            } else {
                scale * rng.random_range(-1.0f32..1.0)
            }
        });
        x.push([p[0], p[1], p[2], 0.0]);
        step.push([d[0], d[1], d[2], 0.0]);
        boxes.push([lo[0], lo[1], lo[2], 0.0]);
        boxes.push([hi[0], hi[1], hi[2], 0.0]);
    }
    let groups = n.div_ceil(TRUST_GROUP);
    let init: Vec<f32> = (0..n)
        .map(|v| {
            if v % 3 == 0 {
                rng.random_range(1.0f32..50.0)
            } else {
                0.0
            }
        })
        .collect();
    let data = [
        Data::V(x.clone()),
        Data::V(step.clone()),
        Data::V(boxes.clone()),
        Data::F(init.clone()),
        nan_f(groups),
    ];
    let (cpu, gpu) = run_both(Kernel::IpcTrust, &data, Params::new(), n as u32);
    let mut limited = 0;
    let mut worst_low = 0.0f64;
    let mut inv = vec![0.0f32; n];
    for v in 0..n {
        // The exact ratio on the f32 inputs.
        let mut exact = 1.0f64;
        for k in 0..3 {
            let (p, d) = (x[v][k] as f64, step[v][k] as f64);
            let (lo, hi) = (boxes[2 * v][k] as f64, boxes[2 * v + 1][k] as f64);
            if d > 0.0 {
                exact = exact.min((hi - p) / d);
            } else if d < 0.0 {
                exact = exact.min((lo - p) / d);
            }
        }
        let exact = exact.max(0.0);
        // Recover the twin's α: from `bound` where it exceeds the initial value.
        let b = cpu[3][v];
        assert!(
            b >= init[v],
            "vertex {v}: bound {b} below its initial {}",
            init[v]
        );
        // Recompute the twin's reciprocal from its contract and check the fold.
        let alpha = {
            let mut a = 1.0f32;
            for k in 0..3 {
                let (p, d) = (x[v][k], step[v][k]);
                let (lo, hi) = (boxes[2 * v][k], boxes[2 * v + 1][k]);
                if d > 0.0 {
                    a = a.min((hi - p) / d);
                } else if d < 0.0 {
                    a = a.min((lo - p) / d);
                }
            }
            if a < 1.0 {
                a = (a * jello::gpu::twins::trust::TRUST_SHRINK).max(0.0);
            }
            a
        };
        inv[v] = 1.0 / alpha.max(1e-30);
        assert_eq!(b, init[v].max(inv[v]), "vertex {v}: the fold");
        let a = alpha as f64;
        assert!(a <= exact, "vertex {v}: α {a} above the exact {exact}");
        if exact < 1.0 {
            limited += 1;
            let low = (exact - a) / exact.max(1e-30);
            worst_low = worst_low.max(low);
            assert!(low <= 2e-6, "vertex {v}: α {a} too far below {exact}");
        }
        for k in 0..3 {
            let q = x[v][k] as f64 + a * step[v][k] as f64;
            assert!(
                q >= boxes[2 * v][k] as f64 && q <= boxes[2 * v + 1][k] as f64,
                "vertex {v}: the move leaves its box on axis {k}"
            );
        }
    }
    for g in 0..groups {
        let m = inv[g * TRUST_GROUP..((g + 1) * TRUST_GROUP).min(n)]
            .iter()
            .fold(0.0f32, |a, &b| a.max(b));
        assert_eq!(cpu[4][g], m, "group {g}: partial");
    }
    if let Some(gpu) = &gpu {
        for (name, i, len) in [("bound", 3, n), ("part", 4, groups)] {
            for j in 0..len {
                let (a, b) = (cpu[i][j], gpu[i][j]);
                assert!(
                    (a - b).abs() <= 1e-6 * a.abs(),
                    "{name}[{j}]: GPU {b}, twin {a}"
                );
            }
        }
    }
    println!("{n} vertices, {limited} limited by their box; α at most {worst_low:.1e} below the exact ratio");
}

/// One far sliding pair: coarse and fine parts of its 4 vertices, their f32 moves, the exact
/// gap (m) and the pair's size L (m).
type FarPair = ([GpuVec4; 4], [GpuVec4; 4], [GpuVec4; 4], f64, f64);

/// Edge–edge pairs 0.2–3 m from the origin, crossing at a gap of 2e-7–1e-6 m and sliding
/// tangentially, in the split layout the JGS2 / VBD device iteration passes (u1 > 0: each
/// position the f32 of its f64 value plus the f32 of the rest — `twins::ipc::pair_relative`).
fn far_sliding_pairs(rng: &mut ChaCha8Rng, n: usize, gaps: std::ops::Range<f64>) -> Vec<FarPair> {
    (0..n)
        .map(|_| {
            let dir = rand_point(rng, 1.0).normalize();
            let c = dir * rng.random_range(0.2..3.0);
            // An orthonormal frame (u, v, normal) at a random orientation.
            let u = rand_point(rng, 1.0).normalize();
            let normal = u.cross(&rand_point(rng, 1.0)).normalize();
            let v = normal.cross(&u);
            let gap = rng.random_range(gaps.clone());
            let half = 0.005;
            let p = [
                c - u * half,
                c + u * half,
                c + normal * gap - v * half,
                c + normal * gap + v * half,
            ];
            let slide = u * rng.random_range(1e-6..1e-5);
            let coarse = p.map(|q| [q.x as f32, q.y as f32, q.z as f32, 0.0]);
            let fine = [0, 1, 2, 3].map(|k| {
                let r = [0, 1, 2].map(|j| (p[k][j] - coarse[k][j] as f64) as f32);
                [r[0], r[1], r[2], 0.0]
            });
            let d = [slide, slide, V3::zeros(), V3::zeros()]
                .map(|s| [s.x as f32, s.y as f32, s.z as f32, 0.0]);
            (coarse, fine, d, gap, 2.0f64.sqrt() * half)
        })
        .collect()
}

#[test]
fn split_positions_let_a_pair_far_from_the_origin_slide_at_a_tiny_gap() {
    // With f32 positions relative to the origin the CCD's position term 4ε·‖x‖ (1e-7 m at
    // 0.2 m, 1.4e-6 m at 3 m) swallows such gaps and certifies little or no motion (the bundled
    // hoop's and cup's stalls, `solver::jgs2::device_ipc`); with the split positions the
    // pair's coordinates round with its size, and a tangential slide, which keeps the gap, is
    // certified whole. The distances check the fine parts themselves: without them (u1 = 0
    // here) a pair's distance is off by up to an ulp of its coordinates (measured: 3.67e-7
    // against the exact 3.85e-7 m, 14× the tolerance).
    let mut rng = common::rng("split_positions_let_a_pair_far_from_the_origin_slide_at_a_tiny_gap");
    let n = 128;
    let cases = far_sliding_pairs(&mut rng, n, 2e-7..1e-6);
    let mut x = vec![[0.0f32; 4]; 8 * n];
    let mut dx = vec![[0.0f32; 4]; 4 * n];
    let mut pairs = Vec::with_capacity(n);
    for (i, (coarse, fine, d, _, _)) in cases.iter().enumerate() {
        for k in 0..4 {
            x[4 * i + k] = coarse[k];
            x[4 * n + 4 * i + k] = fine[k];
            dx[4 * i + k] = d[k];
        }
        let v = 4 * i as u32;
        pairs.push(GpuPair::edge_edge([v, v + 1], [v + 2, v + 3], 1e-12));
    }
    let params = Params {
        f0: 0.0,
        f1: 1.0,
        f2: ETA,
        u1: 4 * n as u32,
        ..Params::new().u0(CAP_SLIDING)
    };
    let data = [
        Data::V(x.clone()),
        Data::V(dx),
        Data::P(pairs.clone()),
        nan_f(n),
        Data::U(vec![u32::MAX; n]),
    ];
    let (cpu, gpu) = run_both(Kernel::IpcCcd, &data, params, n as u32);
    for (name, r) in std::iter::once(("twin", &cpu)).chain(gpu.as_ref().map(|g| ("gpu", g))) {
        for i in 0..n {
            assert_eq!(
                r[3][i],
                1.0,
                "{name} pair {i} (gap {:.2e} m, {:.2} m out): a tangential slide certified \
                 only to t = {} after {} iterations",
                cases[i].3,
                f64v(&cases[i].0[0]).norm(),
                r[3][i],
                r[4][i].to_bits()
            );
        }
    }
    // The pair kernel reads the same layout: its distances lie within the CCD's rounding
    // scale C·L of the exact gaps (C = twins::ccd::ROUND), where f32 positions relative to
    // the origin are off by up to an ulp of the coordinates (2.4e-7 m at 3 m).
    let dhat = 1e-3f32;
    let pdata = [
        Data::V(x),
        Data::P(pairs),
        nan_f(n),
        nan_f(n),
        Data::U(vec![u32::MAX; n]),
        Data::V(vec![[0.0; 4]; 1]),
        nan_f(1),
    ];
    let pparams = Params {
        u1: 4 * n as u32,
        f0: dhat * dhat,
        f1: 1.0,
        ..Params::new()
    };
    let (cpu, gpu) = run_both(Kernel::IpcPairs, &pdata, pparams, n as u32);
    let mut worst = 0.0f64;
    for (name, r) in std::iter::once(("twin", &cpu)).chain(gpu.as_ref().map(|g| ("gpu", g))) {
        for (i, case) in cases.iter().enumerate() {
            let d = (r[3][i] as f64).max(0.0).sqrt();
            let tol = ROUND as f64 * case.4;
            worst = worst.max((d - case.3).abs() / tol);
            assert!(
                (d - case.3).abs() <= tol,
                "{name} pair {i}: distance {d:.4e} m vs the exact {:.4e} m (tolerance {tol:.1e})",
                case.3
            );
        }
    }
    eprintln!("pair distances: worst |d − gap| = {worst:.3} of C·L");
    // Below what f32 certifies for a 1 cm pair (~20ε·L ≈ 2e-8 m): no time, and the pair
    // flagged for a host to decide in f64 (`solver::jgs2::device_ipc`).
    let close = far_sliding_pairs(&mut rng, 32, 1e-10..1e-9);
    let mut x = vec![[0.0f32; 4]; 8 * 32];
    let mut dx = vec![[0.0f32; 4]; 4 * 32];
    let mut pairs = Vec::new();
    for (i, (coarse, fine, d, _, _)) in close.iter().enumerate() {
        for k in 0..4 {
            x[4 * i + k] = coarse[k];
            x[4 * 32 + 4 * i + k] = fine[k];
            dx[4 * i + k] = d[k];
        }
        let v = 4 * i as u32;
        pairs.push(GpuPair::edge_edge([v, v + 1], [v + 2, v + 3], 1e-12));
    }
    let data = [
        Data::V(x),
        Data::V(dx),
        Data::P(pairs),
        nan_f(32),
        Data::U(vec![0; 32]),
    ];
    let params = Params {
        u1: 4 * 32,
        ..params
    };
    let (cpu, gpu) = run_both(Kernel::IpcCcd, &data, params, 32);
    for (name, r) in std::iter::once(("twin", &cpu)).chain(gpu.as_ref().map(|g| ("gpu", g))) {
        for i in 0..32 {
            assert!(
                r[3][i] == 0.0 && r[4][i].to_bits() == UNCERTIFIED,
                "{name} pair {i} at {:.1e} m: t = {}, iterations {}",
                close[i].3,
                r[3][i],
                r[4][i].to_bits()
            );
        }
    }
}
