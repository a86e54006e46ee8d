//! Artifact format: round trip and rejection of every kind of damage.
#![allow(clippy::needless_range_loop)]
use jello_precompute::artifact::{
    decode, encode, encoded_fnv1a64, fnv1a64, read, write, ArtifactErrorKind, FORMAT_VERSION, MAGIC,
};
use jello_precompute::jgs2::{Jgs2Basis, Jgs2Stats, VertexSubspaceData};
use jello_precompute::tree::ClusterTree;

fn sample() -> Jgs2Basis {
    // A real tree over 7 vertices (leaves of ≤ 2), so node ids and ranges are consistent.
    let positions: Vec<[f64; 3]> = (0..7)
        .map(|v| [v as f64 * 0.1, (v % 3) as f64, 0.0])
        .collect();
    let free: Vec<u32> = (0..7).collect();
    let tree = ClusterTree::build(&positions, &free, 2);
    let mut vertices = Vec::new();
    for v in 0..7u32 {
        let c = (v % 4) as usize;
        let nodes = tree.len() as u32;
        vertices.push(VertexSubspaceData {
            // Ascending, never the vertex itself (what decoding checks).
            near_vertices: {
                let mut near: Vec<u32> = (0..c as u32).map(|j| (v + j + 1) % 7).collect();
                near.sort_unstable();
                near
            },
            near_blocks: (0..c)
                .map(|j| std::array::from_fn(|q| (q as f64 - 17.0) * 0.01 + j as f64 + v as f64))
                .collect(),
            far_nodes: (0..c as u32).map(|j| (3 * v + j) % nodes).collect(),
            far_weights: (0..c).map(|j| 0.25 * j as f64).collect(),
            far_blocks: (0..c)
                .map(|j| std::array::from_fn(|q| q as f64 * 0.1 + j as f64))
                .collect(),
            // Odd vertices carry first-order slopes, even ones none (both layouts round-trip).
            far_slopes: if v % 2 == 1 {
                (0..c)
                    .map(|j| std::array::from_fn(|q| q as f64 * -0.05 + j as f64))
                    .collect()
            } else {
                Vec::new()
            },
            far_residual: 0.002 * v as f64,
            a_hat: std::array::from_fn(|q| q as f64 * 0.3 - v as f64),
            schur: std::array::from_fn(|q| q as f64 * 0.7 + v as f64),
        });
    }
    Jgs2Basis {
        vertices,
        stats: Jgs2Stats {
            n_free: 7,
            n_modes: 24,
            n_nodes: tree.len(),
            residual_min: 0.001,
            residual_median: 0.003,
            residual_p90: 0.005,
            residual_max: 0.006,
            fraction_on_target: 1.0,
            mean_samples: 1.5,
            mean_near: 2.5,
            factor_s: 1.0,
            basis_s: 2.0,
            eigen_s: 3.0,
            cubature_s: 4.0,
            total_s: 10.0,
            bytes_per_vertex: 228.0,
            ..Default::default()
        },
        tree,
        far_hmatrix: None,
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("jello-precompute-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn round_trip_through_a_file() {
    let b = sample();
    let p = tmp("rt.jgs2");
    write(&p, &b, 0xdead_beef).unwrap();
    let back = read(&p, 0xdead_beef).unwrap();
    assert_eq!(back, b);
    // no temporary file left behind
    let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    // wrong key: typed error naming the file
    let e = read(&p, 1).unwrap_err();
    assert!(matches!(
        e.kind,
        ArtifactErrorKind::KeyMismatch {
            found: 0xdead_beef,
            expected: 1
        }
    ));
    assert!(e.to_string().contains("rt.jgs2"), "{e}");
    // missing file
    assert!(matches!(
        read(&tmp("missing.jgs2"), 1).unwrap_err().kind,
        ArtifactErrorKind::Io(_)
    ));
}

#[test]
fn header_fields_are_checked() {
    let b = sample();
    let bytes = encode(&b, 42);
    assert_eq!(&bytes[..8], &MAGIC);
    let mut bad = bytes.clone();
    bad[0] ^= 0xff;
    assert!(matches!(decode(&bad, 42), Err(ArtifactErrorKind::BadMagic)));
    // a different version with a consistent checksum is reported as a version error
    let mut v2 = bytes.clone();
    v2[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let end = v2.len() - 8;
    let sum = fnv1a64(&v2[..end]);
    v2[end..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(
        decode(&v2, 42),
        Err(ArtifactErrorKind::WrongVersion { .. })
    ));
    assert!(matches!(
        decode(&bytes, 43),
        Err(ArtifactErrorKind::KeyMismatch { .. })
    ));
    // a valid checksum over a lying count must not allocate or panic
    let mut lie = bytes.clone();
    // header, 3 counts, 3 u64 + 14 f64 stats, the 7-entry permutation, 5 u32 per node, then
    // the first vertex's Â, S and residual: its near count.
    let off = 28 + 12 + 24 + 14 * 8 + 7 * 4 + 20 * b.tree.len() + 19 * 8;
    lie[off..off + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let end = lie.len() - 8;
    let sum = fnv1a64(&lie[..end]);
    lie[end..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(
        decode(&lie, 42),
        Err(ArtifactErrorKind::Malformed(_))
    ));
}

#[test]
fn every_flipped_byte_and_every_truncation_is_rejected() {
    let bytes = encode(&sample(), 7);
    assert!(decode(&bytes, 7).is_ok());
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            assert!(decode(&b, 7).is_err(), "flip of byte {i} accepted");
        }
    }
    for len in 0..bytes.len() {
        match decode(&bytes[..len], 7) {
            Err(ArtifactErrorKind::Truncated { .. }) => {}
            other => panic!("truncation to {len} gave {other:?}"),
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer, 7).is_err());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut x: u64 = 12345;
    for len in 0..400usize {
        let mut b: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(decode(&b, 0).is_err());
        if len >= 8 {
            b[..8].copy_from_slice(&MAGIC);
            assert!(decode(&b, 0).is_err());
        }
    }
}

/// A checksum only proves the bytes are the ones written: a file whose content was poisoned
/// and its checksum recomputed (what `encode` does for any basis) must still be refused, one
/// case per content rule.
#[test]
fn poisoned_content_with_a_valid_checksum_is_refused() {
    type Poison = (&'static str, fn(&mut Jgs2Basis));
    let cases: [Poison; 11] = [
        ("NaN in a near block", |b| {
            b.vertices[3].near_blocks[0][4] = f64::NAN
        }),
        ("inf in Â", |b| b.vertices[0].a_hat[0] = f64::INFINITY),
        ("NaN in S", |b| b.vertices[1].schur[8] = f64::NAN),
        ("NaN in a far slope", |b| {
            b.vertices[3].far_slopes[1][26] = f64::NAN
        }),
        ("negative far residual", |b| {
            b.vertices[2].far_residual = -1.0
        }),
        ("NaN in the stats", |b| b.stats.total_s = f64::NAN),
        ("stats miscount the free vertices", |b| b.stats.n_free = 5),
        ("near vertices out of order", |b| {
            b.vertices[3].near_vertices.reverse()
        }),
        ("a vertex twice in the tree", |b| {
            let first = b.tree.perm[0];
            b.tree.perm[1] = first;
        }),
        ("children not splitting the range", |b| {
            let c = (0..b.tree.len())
                .find(|&c| b.tree.children[c].is_some())
                .unwrap();
            let (l, _) = b.tree.children[c].unwrap();
            b.tree.end[l as usize] -= 1;
        }),
        ("a vertex listing itself as near", |b| {
            b.vertices[2].near_vertices = vec![2];
            b.vertices[2].near_blocks = vec![[0.0; 9]];
        }),
    ];
    assert!(decode(&encode(&sample(), 9), 9).is_ok());
    for (what, poison) in cases {
        let mut b = sample();
        poison(&mut b);
        let bytes = encode(&b, 9);
        match decode(&bytes, 9) {
            Err(ArtifactErrorKind::Malformed(msg)) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: accepted or misreported: {other:?}"),
        }
    }
}

/// A directory or a FIFO at the artifact path is refused from its metadata, before opening
/// (opening a FIFO blocks until a writer comes: this test would hang).
#[test]
fn special_files_are_refused_before_opening() {
    let dir = tmp("a_directory.jgs2");
    std::fs::create_dir_all(&dir).unwrap();
    let e = read(&dir, 1).unwrap_err();
    assert!(matches!(e.kind, ArtifactErrorKind::NotAFile), "{e}");
    assert!(e.to_string().contains("a_directory.jgs2"), "{e}");
    #[cfg(unix)]
    {
        let fifo = tmp("a_fifo.jgs2");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.map(|s| s.success()).unwrap_or(false) {
            let e = read(&fifo, 1).unwrap_err();
            assert!(matches!(e.kind, ArtifactErrorKind::NotAFile), "{e}");
            let _ = std::fs::remove_file(&fifo);
        } else {
            eprintln!("mkfifo unavailable: FIFO case skipped");
        }
    }
}

/// The streamed paths give `encode`'s bytes: the file `write` streams holds exactly them, and
/// `encoded_fnv1a64` is their FNV-1a. `encode` fills a buffer of the size it predicts.
#[test]
fn streamed_write_and_digest_match_encode() {
    let b = sample();
    let bytes = encode(&b, 0x1234);
    assert_eq!(
        bytes.len(),
        bytes.capacity(),
        "encode sized its buffer exactly"
    );
    assert_eq!(encoded_fnv1a64(&b, 0x1234), fnv1a64(&bytes));
    assert_ne!(encoded_fnv1a64(&b, 0x1235), fnv1a64(&bytes));
    let p = tmp("streamed.jgs2");
    write(&p, &b, 0x1234).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), bytes);
    // The empty basis too (no vertices, an empty tree).
    let empty = Jgs2Basis::default();
    let e = encode(&empty, 1);
    assert_eq!(e.len(), e.capacity());
    assert!(decode(&e, 1).is_ok());
}
