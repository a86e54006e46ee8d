//! SMS step 2 (issue 13): modal moment-fitting cubature, the N_cg rule, the SMS artifact.

// Vertex and element loops index several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::collections::VecDeque;
use std::time::Instant;

use jello_precompute::artifact::ArtifactErrorKind;
use jello_precompute::sms::{
    build_sms, cache, ncg_rule, partition_radii, sms_cache_key, snap_n_cg, CubatureTargets,
    SmsBasis, SmsOptions,
};
use jello_precompute::PrecomputeError;

mod common;

use common::{box_grid, signed_volume};

/// The full-rule targets and their reduced-rule values, computed here from scratch: element
/// partition by vertex majority (ties to the smaller id), covering handles, vertex-mean
/// values, `{1, φ_i, φ_i φ_j}` with exact tet volumes. Returns per partition
/// (relative error of the reduced rule, #elements, #samples).
fn independent_check(b: &SmsBasis, x: &[[f64; 3]], tets: &[[u32; 4]]) -> Vec<(f64, usize, usize)> {
    let m = b.n_handles();
    let part = &b.partition.part;
    let mut owner = Vec::with_capacity(tets.len());
    for t in tets {
        let mut votes = vec![0usize; m];
        for &v in t {
            votes[part[v as usize] as usize] += 1;
        }
        let best = (0..m)
            .max_by(|&a, &c| votes[a].cmp(&votes[c]).then(c.cmp(&a)))
            .unwrap();
        owner.push(best);
    }
    let phi = |v: usize, h: u32| -> f64 {
        b.vertex_weights(v)
            .find(|&(g, _)| g == h)
            .map_or(0.0, |(_, w)| w)
    };
    let mut out = Vec::new();
    for p in 0..m {
        let elems: Vec<usize> = (0..tets.len()).filter(|&e| owner[e] == p).collect();
        let mut cover: Vec<u32> = Vec::new();
        for &e in &elems {
            for &v in &tets[e] {
                for (h, w) in b.vertex_weights(v as usize) {
                    if w != 0.0 && !cover.contains(&h) {
                        cover.push(h);
                    }
                }
            }
        }
        let moments = |e: usize| -> Vec<f64> {
            let f: Vec<f64> = cover
                .iter()
                .map(|&h| tets[e].iter().map(|&v| phi(v as usize, h)).sum::<f64>() / 4.0)
                .collect();
            let mut mo = vec![1.0];
            mo.extend_from_slice(&f);
            for i in 0..f.len() {
                for j in i..f.len() {
                    mo.push(f[i] * f[j]);
                }
            }
            mo
        };
        let rows = 1 + cover.len() + cover.len() * (cover.len() + 1) / 2;
        let mut full = vec![0.0; rows];
        for &e in &elems {
            let vol = signed_volume(x, &tets[e]).abs();
            for (f, mo) in full.iter_mut().zip(moments(e)) {
                *f += vol * mo;
            }
        }
        let mut reduced = vec![0.0; rows];
        let mut n_samples = 0;
        for (e, w) in b.cubature.partition_rule(p) {
            assert!(w > 0.0, "partition {p}: weight {w}");
            assert_eq!(owner[e as usize], p, "sample {e} outside partition {p}");
            n_samples += 1;
            for (r, mo) in reduced.iter_mut().zip(moments(e as usize)) {
                *r += w * mo;
            }
        }
        let num: f64 = full
            .iter()
            .zip(&reduced)
            .map(|(a, c)| (a - c) * (a - c))
            .sum::<f64>()
            .sqrt();
        let den: f64 = full.iter().map(|a| a * a).sum::<f64>().sqrt();
        out.push((
            if elems.is_empty() { 0.0 } else { num / den },
            elems.len(),
            n_samples,
        ));
    }
    out
}

#[test]
fn cubature_reproduces_full_rule_with_few_samples() {
    // 12×8×8 cells = 4608 tets, soft left half (1e5 Pa), stiff right half (1e8 Pa).
    let (x, tets) = box_grid(12, 8, 8, 0.125);
    let youngs: Vec<f64> = tets
        .iter()
        .map(|t| {
            let cx = t.iter().map(|&v| x[v as usize][0]).sum::<f64>() / 4.0;
            if cx < 0.75 {
                1e5
            } else {
                1e8
            }
        })
        .collect();
    let pinned = vec![false; x.len()];
    let opts = SmsOptions::new(10);
    let tol = opts.cubature.tolerance;
    let t0 = Instant::now();
    let b = build_sms(&x, &tets, &youngs, &pinned, &opts).unwrap();
    let s = &b.stats;
    println!(
        "box 12x8x8 ({} tets, k=10): build {:.3}s, cubature phase {:.3}s, cubature bytes {}, basis bytes {}",
        tets.len(),
        t0.elapsed().as_secs_f64(),
        s.cubature_s,
        s.cubature_bytes,
        s.bytes
    );
    let check = independent_check(&b, &x, &tets);
    let mut total_el = 0;
    for (p, ((err, ne, ns), fit)) in check.iter().zip(&b.cubature.fits).enumerate() {
        println!(
            "  partition {p}: {ne} elements, {} targets, sampled {}, kept {ns}, fit error {:.2e} (reported {:.2e}){}",
            fit.targets,
            fit.sampled,
            err,
            fit.fit_error,
            if fit.full_rule { ", full rule" } else { "" }
        );
        assert!(*err <= tol, "partition {p}: error {err:e} above {tol:e}");
        assert_eq!(*ne, fit.elements as usize);
        assert_eq!(*ns, fit.samples as usize);
        // The reported error is the error of what is stored (up to round-off in the sums).
        assert!((err - fit.fit_error).abs() <= 1e-12 + 1e-6 * err);
        total_el += ne;
    }
    assert_eq!(total_el, tets.len());
    let ns = b.cubature.n_samples();
    let ratio = ns as f64 / tets.len() as f64;
    println!(
        "  samples {ns} of {} elements (ratio {ratio:.4}), max fit error {:.2e}, full-rule partitions {}",
        tets.len(),
        b.cubature.max_fit_error(),
        b.cubature.full_rule_partitions()
    );
    assert!(ns < tets.len() / 4, "{ns} samples for {} tets", tets.len());
    // The reduced rule integrates 1 over the whole mesh: Σ w = volume (1.5 × 1 × 1 m³).
    let sum_w: f64 = b.cubature.weight.iter().sum();
    assert!((sum_w - 1.5).abs() <= 1e-8, "Σw = {sum_w}");

    // The test can fail: one weight 1 % heavier breaks its partition's fit far above tol.
    let mut broken = b.clone();
    let k = broken.cubature.ptr[3];
    broken.cubature.weight[k] *= 1.01;
    let bad = independent_check(&broken, &x, &tets);
    println!("  weight {k} × 1.01: partition 3 error {:.2e}", bad[3].0);
    assert!(bad[3].0 > 1e3 * tol);
}

#[test]
fn cubature_with_affine_targets_and_pins() {
    let (x, tets) = box_grid(8, 4, 4, 0.125);
    let youngs = vec![1e6; tets.len()];
    let pinned: Vec<bool> = x.iter().map(|p| p[0] == 0.0).collect();
    let mut opts = SmsOptions::new(4);
    opts.cubature.targets = CubatureTargets::WeightsAffine;
    let b = build_sms(&x, &tets, &youngs, &pinned, &opts).unwrap();
    let c = &b.cubature;
    for (p, fit) in c.fits.iter().enumerate() {
        println!(
            "affine targets, partition {p}: {} elements, {} targets, sampled {}, kept {}, error {:.2e}{}",
            fit.elements,
            fit.targets,
            fit.sampled,
            fit.samples,
            fit.fit_error,
            if fit.full_rule { ", full rule" } else { "" }
        );
        assert!(fit.fit_error <= opts.cubature.tolerance);
    }
    assert!(c.weight.iter().all(|&w| w > 0.0));
    let sum_w: f64 = c.weight.iter().sum();
    assert!((sum_w - 0.25).abs() <= 1e-9, "Σw = {sum_w}");
    // The scalar-weight check (a subset of these targets) holds as well.
    for (p, (err, _, _)) in independent_check(&b, &x, &tets).iter().enumerate() {
        assert!(*err <= 1e-9, "partition {p}: {err:e}");
    }
}

/// Hop distance on the Kuhn lattice: edges join p and p ± e for e ∈ {0,1}³ \ 0, so a
/// difference d needs max(d⁺) + max(d⁻) hops.
#[test]
fn ncg_bfs_radius_on_a_bar() {
    // 12 cells along x, 1×1 cross-section; vertices (i, j, k), i ∈ 0..=12, j, k ∈ {0, 1}.
    let (x, tets) = box_grid(12, 1, 1, 0.1);
    let i_of = |v: usize| (x[v][0] / 0.1).round() as usize;
    let part: Vec<u32> = (0..x.len())
        .map(|v| match i_of(v) {
            0..=3 => 0,
            4..=7 => 1,
            _ => 2,
        })
        .collect();
    let at = |i: usize| {
        (0..x.len())
            .find(|&v| i_of(v) == i && x[v][1] == 0.0 && x[v][2] == 0.0)
            .unwrap() as u32
    };
    let centroid = [at(1), at(5), at(10)];
    // Hand count: partition 0 (i 0..3, centre i=1): (3,·,·) is 2 hops ahead, (0,1,1) is one
    // back and one diagonal up = 2. Partition 1 (4..7, centre 5): (7,1,1) 2, (4,1,1) 1+1 = 2.
    // Partition 2 (8..12, centre 10): (12,1,1) 2, (8,1,1) 2 back + 1 up = 3.
    let r = partition_radii(x.len(), &tets, &part, &centroid).unwrap();
    println!("bar 12x1x1: radii {r:?}");
    assert_eq!(r, vec![2, 2, 3]);
    let rule = ncg_rule(x.len(), &tets, &part, &centroid, None).unwrap();
    assert!((rule.mean_radius - 7.0 / 3.0).abs() < 1e-15);
    assert_eq!(rule.n_cg, 20);
    assert!(!rule.overridden);
    let rule = ncg_rule(x.len(), &tets, &part, &centroid, Some(33)).unwrap();
    assert_eq!((rule.n_cg, rule.overridden), (33, true));

    // A long bar: two partitions i ∈ 0..=39 (centre i=0) and 40..=80 (centre i=40): radii 39
    // ((39,1,1) is all-ahead, 39 hops) and 40; mean 39.5 → 40.
    let (x, tets) = box_grid(80, 1, 1, 0.1);
    let i_of = |v: usize| (x[v][0] / 0.1).round() as usize;
    let part: Vec<u32> = (0..x.len()).map(|v| (i_of(v) >= 40) as u32).collect();
    let at = |i: usize| {
        (0..x.len())
            .find(|&v| i_of(v) == i && x[v][1] == 0.0 && x[v][2] == 0.0)
            .unwrap() as u32
    };
    let rule = ncg_rule(x.len(), &tets, &part, &[at(0), at(40)], None).unwrap();
    println!(
        "bar 80x1x1: radii {:?}, mean {}",
        rule.radius, rule.mean_radius
    );
    assert_eq!(rule.radius, vec![39, 40]);
    assert_eq!(rule.n_cg, 40);

    // The snap: the closer of 20 and 40, 30 to 40.
    for (mean, want) in [
        (0.0, 20),
        (2.3, 20),
        (29.99, 20),
        (30.0, 40),
        (35.0, 40),
        (120.0, 40),
    ] {
        assert_eq!(snap_n_cg(mean), want, "mean {mean}");
    }
    // A centroid outside its partition and a disconnected partition are errors.
    assert!(partition_radii(x.len(), &tets, &part, &[at(40), at(0)]).is_err());
    let mut split = part.clone();
    for v in 0..x.len() {
        if (20..=22).contains(&i_of(v)) {
            split[v] = 1;
        }
    }
    assert!(matches!(
        partition_radii(x.len(), &tets, &split, &[at(0), at(40)]),
        Err(PrecomputeError::Invalid(_))
    ));
}

#[test]
fn ncg_of_a_build_matches_an_independent_bfs() {
    let (x, tets) = box_grid(10, 4, 4, 0.1);
    let youngs = vec![1e6; tets.len()];
    let pinned = vec![false; x.len()];
    let b = build_sms(&x, &tets, &youngs, &pinned, &SmsOptions::new(5)).unwrap();
    let mut adj = vec![Vec::new(); x.len()];
    for t in &tets {
        for &a in t {
            for &c in t {
                if a != c {
                    adj[a as usize].push(c as usize);
                }
            }
        }
    }
    let p = &b.partition;
    let mut radii = Vec::new();
    for (h, &c) in p.centroid.iter().enumerate() {
        let mut d = vec![usize::MAX; x.len()];
        d[c as usize] = 0;
        let mut q = VecDeque::from([c as usize]);
        while let Some(v) = q.pop_front() {
            for &w in &adj[v] {
                if p.part[w] as usize == h && d[w] == usize::MAX {
                    d[w] = d[v] + 1;
                    q.push_back(w);
                }
            }
        }
        radii.push(
            (0..x.len())
                .filter(|&v| p.part[v] as usize == h)
                .map(|v| d[v])
                .max()
                .unwrap() as u32,
        );
    }
    let mean = radii.iter().sum::<u32>() as f64 / radii.len() as f64;
    println!(
        "box 10x4x4, k=5: radii {radii:?}, mean {mean}, n_cg {}",
        b.n_cg.n_cg
    );
    assert_eq!(b.n_cg.radius, radii);
    assert_eq!(b.n_cg.n_cg, if mean < 30.0 { 20 } else { 40 });
    let mut opts = SmsOptions::new(5);
    opts.n_cg = Some(7);
    let b7 = build_sms(&x, &tets, &youngs, &pinned, &opts).unwrap();
    assert_eq!((b7.n_cg.n_cg, b7.n_cg.overridden), (7, true));
}

#[test]
fn unreachable_tolerance_keeps_the_full_rule() {
    let (x, tets) = box_grid(4, 3, 3, 0.25);
    let youngs = vec![1e6; tets.len()];
    let pinned = vec![false; x.len()];
    let mut o = SmsOptions::new(3);
    o.cubature.tolerance = 1e-300;
    let b = build_sms(&x, &tets, &youngs, &pinned, &o).unwrap();
    let c = &b.cubature;
    assert_eq!(c.full_rule_partitions(), c.fits.len());
    assert_eq!(c.n_samples(), tets.len());
    for p in 0..c.fits.len() {
        for (e, w) in c.partition_rule(p) {
            let vol = signed_volume(&x, &tets[e as usize]).abs();
            assert!(
                (w - vol).abs() <= 1e-15 * vol,
                "element {e}: {w} vs volume {vol}"
            );
        }
    }
    println!(
        "tolerance 1e-300: every partition keeps the full rule, max error {:.2e}",
        c.max_fit_error()
    );
}

#[test]
fn bad_cubature_options_are_errors() {
    let (x, tets) = box_grid(3, 3, 3, 0.2);
    let youngs = vec![1e6; tets.len()];
    let pinned = vec![false; x.len()];
    for (tol, batch) in [(0.0, 8), (f64::NAN, 8), (1e-9, 0)] {
        let mut o = SmsOptions::new(3);
        o.cubature.tolerance = tol;
        o.cubature.batch = batch;
        match build_sms(&x, &tets, &youngs, &pinned, &o) {
            Err(PrecomputeError::Invalid(s)) => assert!(s.contains("cubature"), "{s}"),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
}

#[test]
fn artifact_round_trip_corruption_and_staleness() {
    let (x, tets) = box_grid(6, 4, 4, 0.1);
    let youngs = vec![1e6; tets.len()];
    let pinned: Vec<bool> = x.iter().map(|p| p[0] == 0.0).collect();
    let opts = SmsOptions::new(6);
    let b = build_sms(&x, &tets, &youngs, &pinned, &opts).unwrap();
    let key = sms_cache_key(&x, &tets, &youngs, &pinned, &opts);
    let dir = std::env::temp_dir().join(format!("jello-sms-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("box.jsms");
    cache::write(&path, &b, &tets, key).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let back = cache::read(&path, key, &x, &tets).unwrap();
    assert_eq!(back, b, "decoded basis differs");
    // Bit-identical: re-encoding the decoded basis gives the file's bytes.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(cache::encode(&back, tets.len(), key), bytes);
    println!(
        "artifact: {size} bytes for {} vertices, {} tets ({:.1} bytes/vertex)",
        x.len(),
        tets.len(),
        size as f64 / x.len() as f64
    );

    // One flipped byte in the middle: an error that names the file.
    let mut bad = bytes.clone();
    let k = bad.len() / 2;
    bad[k] ^= 0x10;
    let bad_path = dir.join("flipped.jsms");
    std::fs::write(&bad_path, &bad).unwrap();
    let err = cache::read(&bad_path, key, &x, &tets).unwrap_err();
    println!("flipped byte {k}: {err}");
    assert!(err.to_string().contains("flipped.jsms"));
    assert!(matches!(
        err.kind,
        ArtifactErrorKind::ChecksumMismatch { .. }
    ));
    // Truncated.
    std::fs::write(&bad_path, &bytes[..bytes.len() - 5]).unwrap();
    assert!(cache::read(&bad_path, key, &x, &tets).is_err());

    // A changed modulus (one tet) gives another key: the cached file is stale.
    let mut youngs2 = youngs.clone();
    youngs2[17] = 2e6;
    let key2 = sms_cache_key(&x, &tets, &youngs2, &pinned, &opts);
    assert_ne!(key2, key);
    let err = cache::read(&path, key2, &x, &tets).unwrap_err();
    println!("changed modulus: {err}");
    assert!(matches!(err.kind, ArtifactErrorKind::KeyMismatch { .. }));
    // Pins, positions and options move the key too.
    let mut pinned2 = pinned.clone();
    pinned2[x.len() - 1] = true;
    let mut x2 = x.clone();
    x2[5][1] += 1e-9;
    let mut o2 = opts.clone();
    o2.cubature.tolerance = 1e-6;
    let mut o3 = opts.clone();
    o3.n_cg = Some(20);
    for k2 in [
        sms_cache_key(&x, &tets, &youngs, &pinned2, &opts),
        sms_cache_key(&x2, &tets, &youngs, &pinned, &opts),
        sms_cache_key(&x, &tets, &youngs, &pinned, &o2),
        sms_cache_key(&x, &tets, &youngs, &pinned, &o3),
    ] {
        assert_ne!(k2, key);
    }
    // A different mesh with the right key is refused (sizes checked).
    assert!(matches!(
        cache::decode(&bytes, key, &x, &tets[1..]),
        Err(ArtifactErrorKind::Malformed(_))
    ));
    // Another artifact kind is refused by its magic.
    let dot = jello_precompute::partition::encode(
        &jello_precompute::partition::Decomposition::new(x.len(), &tets, 2).unwrap(),
        key,
    );
    assert!(matches!(
        cache::decode(&dot, key, &x, &tets),
        Err(ArtifactErrorKind::BadMagic)
    ));
    // Intact framing, poisoned content (a NaN weight, a negative cubature weight, a sample
    // outside the mesh): refused as malformed, not decoded.
    for poison in 0..3 {
        let mut p = b.clone();
        match poison {
            0 => p.vertex_weight[0] = f64::NAN,
            1 => p.cubature.weight[0] = -1.0,
            _ => p.cubature.element[0] = tets.len() as u32,
        }
        let e = cache::decode(&cache::encode(&p, tets.len(), key), key, &x, &tets);
        assert!(
            matches!(e, Err(ArtifactErrorKind::Malformed(_))),
            "poison {poison}: {e:?}"
        );
    }
    // Every single-byte flip is an error, never a panic (sampled every 7th byte).
    for i in (0..bytes.len()).step_by(7) {
        let mut c = bytes.clone();
        c[i] ^= 0xff;
        assert!(cache::decode(&c, key, &x, &tets).is_err(), "flip at {i}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
