//! The device broad phase (`jello::gpu::DeviceBroadPhase`, kernels `broad_boxes`, `broad_clear`,
//! `broad_insert`, `broad_query`; twins in `jello::gpu::twins::broad`).
//!
//! **Against the host.** The device list must be a superset of
//! `IpcContact::candidate_pairs`' (through its public queries `candidates_within` — boxes at
//! rest grown by (d̂ + margin)/2 — and `swept_candidates`), each pair exactly once, edge–edge
//! records with the host's ε× to f32 rounding. Every extra pair must be explained by the boxes'
//! outward rounding: its f64 boxes miss overlapping by at most twice the documented slack
//! 2⁻²⁰·(M + r) (M the largest |x| + |dx| coordinate of its corners relative to the device's
//! origin). Counts are printed (device, host, extra).
//!
//! **GPU against the twin** on fresh random surfaces every run (seed printed; replay with
//! JELLO_TEST_SEED): jittered triangle sheets crossing each other, one without self-contact, a
//! big obstacle quad (large boxes kept out of the grid), a few vertices swept far (large
//! queries): the same pair set, ε× bit for bit (the list's order is the GPU's scheduling).
//!
//! **Overflow.** From capacities of one entry and one pair: the counts report the overflow, the
//! buffers grow to them, and the rerun gives the set of a run with room.

use crate::common;
use jello::contact::{BodyKind, CollisionBody, CollisionMesh, ContactPair, IpcContact};
use jello::gpu::{Device, DeviceBroadPhase, GpuPair, GpuVec4, Plan};
use rand::Rng;
use std::collections::BTreeMap;

/// 2⁻²⁰: the boxes' relative slack (`twins::broad::BOX_SLACK`).
const SLACK: f64 = 9.5367431640625e-7;

type Key = (u32, [u32; 4]);

fn key(p: &GpuPair) -> Key {
    (p.kind, p.v)
}

/// Positions relative to `origin` as the device holds them.
fn to_device(xs: &[[f64; 3]], origin: [f64; 3]) -> Vec<GpuVec4> {
    xs.iter()
        .map(|p| {
            [
                (p[0] - origin[0]) as f32,
                (p[1] - origin[1]) as f32,
                (p[2] - origin[2]) as f32,
                0.0,
            ]
        })
        .collect()
}

fn to_device_dx(dxs: &[[f64; 3]]) -> Vec<GpuVec4> {
    dxs.iter()
        .map(|d| [d[0] as f32, d[1] as f32, d[2] as f32, 0.0])
        .collect()
}

/// One query's inputs: f64 positions (m) and displacements, the device's origin and the
/// inflation (m).
struct Query<'a> {
    xs: &'a [[f64; 3]],
    dxs: Option<&'a [[f64; 3]]>,
    origin: [f64; 3],
    inflation: f64,
}

/// The device's pairs keyed, after checking each appears once.
fn device_pairs(
    dev: &mut Device,
    mesh: &CollisionMesh,
    q: &Query,
    capacity: Option<(usize, usize)>,
    what: &str,
) -> BTreeMap<Key, GpuPair> {
    let x = dev.upload("x", &to_device(q.xs, q.origin)).unwrap();
    let dx = q.dxs.map(|d| dev.upload("dx", &to_device_dx(d)).unwrap());
    let mut bp = match capacity {
        Some((p, e)) => DeviceBroadPhase::with_capacity(dev, mesh, p, e).unwrap(),
        None => DeviceBroadPhase::new(dev, mesh).unwrap(),
    };
    let n = bp.find(dev, &x, dx.as_ref(), q.inflation).unwrap();
    let list = dev.read_range(bp.pairs(), 0..n).unwrap();
    bp.free(dev);
    dev.free(x);
    if let Some(d) = dx {
        dev.free(d);
    }
    let mut out = BTreeMap::new();
    for p in list {
        assert!(
            out.insert(key(&p), p).is_none(),
            "{what}: pair {:?} listed twice",
            key(&p)
        );
    }
    out
}

/// The corners of a pair's two primitives.
fn sides(k: &Key) -> (Vec<u32>, Vec<u32>) {
    let v = k.1;
    if k.0 == GpuPair::POINT_TRIANGLE {
        (vec![v[0]], vec![v[1], v[2], v[3]])
    } else {
        (vec![v[0], v[1]], vec![v[2], v[3]])
    }
}

/// How far (m) the pair's f64 boxes (grown by r) are from overlapping along their worst axis,
/// and the pair's M (largest |x| + |dx| coordinate relative to the origin).
fn box_gap(k: &Key, q: &Query) -> (f64, f64) {
    let (a, b) = sides(k);
    let r = 0.5 * q.inflation;
    let mut m = 0.0f64;
    let mut bx = |ids: &[u32]| {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for &v in ids {
            let p = q.xs[v as usize];
            let d = q.dxs.map_or([0.0; 3], |d| d[v as usize]);
            for c in 0..3 {
                let rel = p[c] - q.origin[c];
                m = m.max(rel.abs() + d[c].abs());
                lo[c] = lo[c].min(p[c]).min(p[c] + d[c]);
                hi[c] = hi[c].max(p[c]).max(p[c] + d[c]);
            }
        }
        (lo.map(|v| v - r), hi.map(|v| v + r))
    };
    let (alo, ahi) = bx(&a);
    let (blo, bhi) = bx(&b);
    let gap = (0..3)
        .map(|c| (blo[c] - ahi[c]).max(alo[c] - bhi[c]))
        .fold(f64::NEG_INFINITY, f64::max);
    (gap, m + r)
}

/// Asserts `device` ⊇ `host` with ε× to f32 rounding and every extra pair within twice the
/// boxes' slack of overlapping; returns the number of extra pairs.
fn check_superset(
    device: &BTreeMap<Key, GpuPair>,
    host: &[ContactPair],
    q: &Query,
    what: &str,
) -> usize {
    let mut in_host = std::collections::BTreeSet::new();
    for hp in host {
        let g = GpuPair::of(hp);
        let k = key(&g);
        in_host.insert(k);
        let d = device
            .get(&k)
            .unwrap_or_else(|| panic!("{what}: host pair {k:?} missing on the device"));
        let rel = (d.eps_x as f64 - hp.eps_x).abs() / hp.eps_x.abs().max(f64::MIN_POSITIVE);
        assert!(
            hp.eps_x == 0.0 && d.eps_x == 0.0 || rel < 1e-6,
            "{what}: pair {k:?} eps_x {} on the device, {} on the host",
            d.eps_x,
            hp.eps_x
        );
    }
    let mut worst = 0.0f64;
    let mut extra = 0;
    for k in device.keys().filter(|k| !in_host.contains(*k)) {
        extra += 1;
        let (gap, scale) = box_gap(k, q);
        let ratio = gap / (SLACK * scale);
        worst = worst.max(ratio);
        assert!(
            ratio <= 2.0,
            "{what}: extra pair {k:?} is {gap:.3e} m from overlapping, {ratio:.2} × the slack"
        );
    }
    eprintln!(
        "{what}: device {} pairs, host {}, extra {extra} (worst gap {worst:.2} × the slack)",
        device.len(),
        host.len()
    );
    extra
}

/// A jittered `m × m` sheet of triangles at `c` spanned by `u`, `v` (m), vertices from `base`.
fn sheet(
    rng: &mut impl Rng,
    m: usize,
    c: [f64; 3],
    u: [f64; 3],
    v: [f64; 3],
    base: u32,
) -> (Vec<[f64; 3]>, Vec<[u32; 3]>) {
    let mut x = Vec::new();
    for i in 0..m {
        for j in 0..m {
            let (a, b) = (i as f64 / (m - 1) as f64, j as f64 / (m - 1) as f64);
            let jit = 0.2 / m as f64;
            x.push(
                [0, 1, 2].map(|k| c[k] + a * u[k] + b * v[k] + jit * rng.random_range(-1.0..1.0)),
            );
        }
    }
    let mut f = Vec::new();
    let id = |i: usize, j: usize| base + (i * m + j) as u32;
    for i in 0..m - 1 {
        for j in 0..m - 1 {
            f.push([id(i, j), id(i + 1, j), id(i + 1, j + 1)]);
            f.push([id(i, j), id(i + 1, j + 1), id(i, j + 1)]);
        }
    }
    (x, f)
}

/// Random crossing sheets (one without self-contact) and a big obstacle quad.
fn random_mesh(rng: &mut impl Rng) -> (CollisionMesh, Vec<[f64; 3]>) {
    let mut x = Vec::new();
    let mut faces = Vec::new();
    let mut bodies = Vec::new();
    for b in 0..3 {
        let m = rng.random_range(5..12);
        let mut dir = || [0, 1, 2].map(|_| rng.random_range(-0.5..0.5));
        let (u, v) = (dir(), dir());
        let c = [0, 1, 2].map(|_| rng.random_range(-0.3..0.3));
        let (sx, sf) = sheet(rng, m, c, u, v, x.len() as u32);
        bodies.push(CollisionBody {
            name: format!("sheet{b}"),
            kind: BodyKind::Deformable,
            self_contact: b != 1,
            vertices: x.len()..x.len() + sx.len(),
        });
        x.extend(sx);
        faces.extend(sf);
    }
    let mut mesh = CollisionMesh::from_triangles(&x, bodies, &faces).unwrap();
    let y = rng.random_range(-0.2..0.0);
    mesh.add_obstacle(
        "floor",
        &[
            [-2.0, y, -2.0],
            [2.0, y, -2.0],
            [2.0, y, 2.0],
            [-2.0, y, 2.0],
        ],
        &[[0, 1, 2], [0, 2, 3]],
    )
    .unwrap();
    (mesh, x)
}

fn ipc_of(mesh: &CollisionMesh, x: &[[f64; 3]], dhat: f64) -> IpcContact {
    IpcContact::new(mesh.clone(), bytemuck::cast_slice(x), dhat, None).unwrap()
}

#[test]
fn gpu_matches_twin_and_covers_the_host_on_random_surfaces() {
    let Some(mut gpu) = common::gpu_device() else {
        return;
    };
    let mut cpu = Device::cpu();
    let mut rng = common::rng("gpu_broad random surfaces");
    for round in 0..4 {
        let (mesh, x) = random_mesh(&mut rng);
        let dhat = rng.random_range(1e-3..2e-2);
        let ipc = ipc_of(&mesh, &x, dhat);
        let xs = ipc.positions(bytemuck::cast_slice(&x)).into_owned();
        let origin = [0, 1, 2].map(|_| rng.random_range(-2.0..2.0));
        let swept = round % 2 == 1;
        let dxs: Vec<[f64; 3]> = (0..xs.len())
            .map(|v| {
                // A few vertices swept far: boxes over many cells (the large-box paths).
                let s = if v % 37 == 0 { 0.6 } else { 0.03 };
                if v < mesh.num_model_vertices {
                    [0, 1, 2].map(|_| s * rng.random_range(-1.0..1.0))
                } else {
                    [0.0; 3]
                }
            })
            .collect();
        let (q, host) = if swept {
            let q = Query {
                xs: &xs,
                dxs: Some(&dxs),
                origin,
                inflation: dhat,
            };
            (q, ipc.swept_candidates(&xs, &dxs).unwrap())
        } else {
            let margin = rng.random_range(0.0..dhat);
            let q = Query {
                xs: &xs,
                dxs: None,
                origin,
                inflation: dhat + margin,
            };
            (q, ipc.candidates_within(&xs, margin).unwrap())
        };
        let what = format!(
            "random surfaces {round} ({} faces, {} edges{})",
            mesh.faces.len(),
            mesh.edges.len(),
            if swept { ", swept" } else { "" }
        );
        let on_gpu = device_pairs(&mut gpu, &mesh, &q, None, &format!("{what}, GPU"));
        let on_cpu = device_pairs(&mut cpu, &mesh, &q, None, &format!("{what}, twin"));
        assert!(
            on_gpu.keys().eq(on_cpu.keys()),
            "{what}: GPU {} pairs, twin {} — the sets differ",
            on_gpu.len(),
            on_cpu.len()
        );
        for (k, g) in &on_gpu {
            assert_eq!(
                g.eps_x.to_bits(),
                on_cpu[k].eps_x.to_bits(),
                "{what}: pair {k:?} eps_x"
            );
        }
        check_superset(&on_gpu, &host, &q, &what);
    }
}

/// A bundled scene, its IPC contact and the states to test: the start and a projected-Newton
/// state after `steps` steps.
fn scene_states(
    name: &str,
    steps: usize,
) -> (
    jello::scene::BuiltScene,
    Vec<(String, jello::problem::State)>,
) {
    let built = common::bundled_scene(name);
    let start = built.model.initial_state(&built.velocity);
    let later = common::state_after(&built, steps);
    (
        built,
        vec![
            (format!("{name} start"), start),
            (format!("{name} after {steps} Newton steps"), later),
        ],
    )
}

#[test]
fn device_list_covers_the_host_list_on_scenes() {
    let Some(mut gpu) = common::gpu_device() else {
        return;
    };
    let mut cpu = Device::cpu();
    let (mut total_dev, mut total_host) = (0usize, 0usize);
    for (name, steps) in [
        ("contact_stack.toml", 10),
        ("contact_balls.toml", 5),
        ("house_of_cards.toml", 5),
    ] {
        let (built, states) = scene_states(name, steps);
        let ipc = built.model.contact.as_ref().expect("an IPC scene").clone();
        let h = built.config.h;
        for (label, state) in states {
            let xs = ipc.positions(&state.x).into_owned();
            // The device's origin: the positions' centroid (as the device solvers use).
            let n = xs.len() as f64;
            let origin = [0, 1, 2].map(|k| xs.iter().map(|p| p[k]).sum::<f64>() / n);
            // The step's predicted motion h·v (obstacles static).
            let dxs: Vec<[f64; 3]> = (0..xs.len())
                .map(|v| {
                    if v < ipc.mesh.num_model_vertices {
                        [0, 1, 2].map(|k| h * state.v[3 * v + k])
                    } else {
                        [0.0; 3]
                    }
                })
                .collect();
            let margin = ipc.dhat;
            let cases = [
                (
                    "d̂",
                    Query {
                        xs: &xs,
                        dxs: None,
                        origin,
                        inflation: ipc.dhat,
                    },
                    ipc.candidates_within(&xs, 0.0).unwrap(),
                ),
                (
                    "d̂ + margin d̂",
                    Query {
                        xs: &xs,
                        dxs: None,
                        origin,
                        inflation: ipc.dhat + margin,
                    },
                    ipc.candidates_within(&xs, margin).unwrap(),
                ),
                (
                    "swept over h·v",
                    Query {
                        xs: &xs,
                        dxs: Some(&dxs),
                        origin,
                        inflation: ipc.dhat,
                    },
                    ipc.swept_candidates(&xs, &dxs).unwrap(),
                ),
            ];
            for (case, q, host) in cases {
                let what = format!("{label}, {case}");
                let on_gpu = device_pairs(&mut gpu, &ipc.mesh, &q, None, &format!("{what}, GPU"));
                check_superset(&on_gpu, &host, &q, &format!("{what}, GPU"));
                let on_cpu = device_pairs(&mut cpu, &ipc.mesh, &q, None, &format!("{what}, twin"));
                assert!(
                    on_gpu.keys().eq(on_cpu.keys()),
                    "{what}: GPU and twin sets differ ({} against {})",
                    on_gpu.len(),
                    on_cpu.len()
                );
                total_dev += on_gpu.len();
                total_host += host.len();
            }
        }
    }
    eprintln!(
        "all scenes: device {total_dev} pairs, host {total_host} (+{:.2} %)",
        100.0 * (total_dev as f64 / total_host.max(1) as f64 - 1.0)
    );
}

/// From capacities of one pair and one entry, the counts report the overflow, growing to them
/// gives the set of a run with room (house of cards: its floor's big triangles are large boxes).
fn overflow_grows_to_the_same_set(dev: &mut Device, what: &str) {
    let built = common::bundled_scene("house_of_cards.toml");
    let ipc = built.model.contact.as_ref().unwrap().clone();
    let state = built.model.initial_state(&built.velocity);
    let xs = ipc.positions(&state.x).into_owned();
    let q = Query {
        xs: &xs,
        dxs: None,
        origin: [0.0; 3],
        inflation: 4.0 * ipc.dhat,
    };
    let roomy = device_pairs(dev, &ipc.mesh, &q, None, what);
    assert!(roomy.len() > 1, "{what}: the scene has pairs");
    let x = dev.upload("x", &to_device(&xs, q.origin)).unwrap();
    let mut bp = DeviceBroadPhase::with_capacity(dev, &ipc.mesh, 1, 1).unwrap();
    let mut first = None;
    let mut runs = 0;
    let count = loop {
        let mut plan = Plan::new();
        bp.record(&mut plan, &x, None, q.inflation).unwrap();
        dev.submit(&plan).unwrap();
        runs += 1;
        let c = bp.read_count(dev).unwrap();
        first.get_or_insert(c);
        if !c.overflowed() {
            break c;
        }
        assert!(
            runs < 4,
            "{what}: still overflowing after {runs} runs: {c:?}"
        );
        assert!(
            bp.grow(dev, &c).unwrap(),
            "{what}: an overflow grows a buffer"
        );
    };
    let first = first.unwrap();
    eprintln!("{what}: first run {first:?}; complete after {runs} runs: {count:?}");
    assert!(
        first.entries > first.entry_capacity && first.pairs >= 1 && first.overflowed(),
        "{what}: the first run reports its overflow: {first:?}"
    );
    assert_eq!(count.pairs, roomy.len(), "{what}: pair count after growing");
    let list = dev.read_range(bp.pairs(), 0..count.pairs).unwrap();
    let keys: std::collections::BTreeSet<Key> = list.iter().map(key).collect();
    assert!(keys.iter().eq(roomy.keys()), "{what}: the grown run's set");
    bp.free(dev);
    dev.free(x);
}

#[test]
fn overflow_is_reported_and_grown_on_gpu_and_twin() {
    let Some(mut gpu) = common::gpu_device() else {
        return;
    };
    overflow_grows_to_the_same_set(&mut gpu, "overflow, GPU");
    overflow_grows_to_the_same_set(&mut Device::cpu(), "overflow, twin");
}

#[test]
fn bad_queries_are_refused() {
    let mut dev = Device::cpu();
    let built = common::bundled_scene("contact_stack.toml");
    let ipc = built.model.contact.as_ref().unwrap().clone();
    let bp = DeviceBroadPhase::new(&mut dev, &ipc.mesh).unwrap();
    let short = dev.alloc::<GpuVec4>("short", 3).unwrap();
    let full = dev
        .alloc::<GpuVec4>("full", ipc.mesh.num_vertices())
        .unwrap();
    let mut plan = Plan::new();
    let e = bp.record(&mut plan, &short, None, 1e-3).unwrap_err();
    assert!(e.to_string().contains("positions"), "{e}");
    let e = bp.record(&mut plan, &full, Some(&short), 1e-3).unwrap_err();
    assert!(e.to_string().contains("displacements"), "{e}");
    for bad in [f64::NAN, -1e-3, f64::INFINITY] {
        let e = bp.record(&mut plan, &full, None, bad).unwrap_err();
        assert!(e.to_string().contains("inflation"), "{e}");
    }
    assert!(plan.is_empty(), "a refused query records nothing");
}
