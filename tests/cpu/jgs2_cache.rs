//! The JGS2 artifact cache on hostile files: a file whose content was poisoned and whose
//! checksum was recomputed, a valid artifact of another model planted under this model's key, a
//! directory or FIFO at the cache path, and a cache directory that cannot be written. Each is
//! rebuilt (or not cached) with exactly one warning, never trusted and never a panic.

use jello::material::MaterialModel;
use jello::problem::Model;
use jello::solver::jgs2::{cache_key, load_or_build, SubspaceOptions, SubspaceOrigin};
use jello_precompute::artifact;
use std::path::{Path, PathBuf};

use crate::common;

fn beam(cells: [usize; 3]) -> Model {
    common::clamped_beam(MaterialModel::StableNeoHookean, 1e5, 0.5, cells, vec![])
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_jgs2_cache_{}_{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Builds once into `d`, returning the artifact path.
fn build_into(m: &Model, d: &Path) -> PathBuf {
    let (_, origin, w) = load_or_build(m, 0.01, &SubspaceOptions::node_fits(), Some(d)).unwrap();
    assert!(w.is_empty(), "{w:?}");
    match origin {
        SubspaceOrigin::Built(Some(p)) => p,
        o => panic!("expected a written artifact, got {o:?}"),
    }
}

/// Loads again and asserts a rebuild with one warning naming the file and containing `needle`.
fn assert_rebuilt(m: &Model, d: &Path, path: &Path, needle: &str) {
    let (sub, origin, w) = load_or_build(m, 0.01, &SubspaceOptions::node_fits(), Some(d)).unwrap();
    assert!(
        matches!(origin, SubspaceOrigin::Built(_)),
        "a bad artifact was trusted: {origin:?}"
    );
    assert_eq!(w.len(), 1, "{w:?}");
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(w[0].contains(&*name) && w[0].contains(needle), "{}", w[0]);
    assert!(w[0].contains("rebuilding"), "{}", w[0]);
    assert_eq!(sub.vertices.len(), m.num_vertices());
}

/// NaN written into the artifact and the checksum recomputed: the checksum passes, the content
/// check does not.
#[test]
fn poisoned_artifact_with_a_recomputed_checksum_is_rebuilt() {
    let m = beam([3, 1, 1]);
    let d = dir("poison");
    let path = build_into(&m, &d);
    let key = cache_key(&m, 0.01, &SubspaceOptions::node_fits());
    let mut basis = artifact::read(&path, key).unwrap();
    let v = (0..m.num_vertices()).find(|&v| !m.pinned[v]).unwrap();
    basis.vertices[v].a_hat[4] = f64::NAN;
    std::fs::write(&path, artifact::encode(&basis, key)).unwrap();
    assert_rebuilt(&m, &d, &path, "non-finite");
    // The rebuilt file replaced the poisoned one.
    assert!(artifact::read(&path, key).is_ok());
    let _ = std::fs::remove_dir_all(&d);
}

/// A valid artifact of a smaller model, relabelled with this model's key (a consistent file
/// that does not fit): refused by the model check, rebuilt.
#[test]
fn artifact_of_another_model_under_this_key_is_rebuilt() {
    let m = beam([3, 1, 1]);
    let small = beam([2, 1, 1]);
    let d = dir("other_model");
    let small_path = build_into(&small, &d);
    let small_key = cache_key(&small, 0.01, &SubspaceOptions::node_fits());
    let basis = artifact::read(&small_path, small_key).unwrap();
    let key = cache_key(&m, 0.01, &SubspaceOptions::node_fits());
    let path = d.join(format!("jgs2-{key:016x}.bin"));
    std::fs::write(&path, artifact::encode(&basis, key)).unwrap();
    assert_rebuilt(&m, &d, &path, "vertex records for a model of");
    let _ = std::fs::remove_dir_all(&d);
}

/// A directory or a FIFO where the artifact should be: refused before opening (no hang), the
/// subspace rebuilt, and the failed write reported once without claiming a cached file.
#[test]
fn special_file_at_the_cache_path_is_refused_not_opened() {
    let m = beam([2, 1, 1]);
    let key = cache_key(&m, 0.01, &SubspaceOptions::node_fits());
    let d = dir("special");
    let path = d.join(format!("jgs2-{key:016x}.bin"));
    std::fs::create_dir_all(&path).unwrap();
    let (_, origin, w) = load_or_build(&m, 0.01, &SubspaceOptions::node_fits(), Some(&d)).unwrap();
    // One warning for the refused read, one for the write the directory blocks.
    assert_eq!(origin, SubspaceOrigin::Built(None), "{w:?}");
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("not a regular file"), "{}", w[0]);
    assert!(w[1].contains("not cached"), "{}", w[1]);
    std::fs::remove_dir_all(&path).unwrap();
    #[cfg(unix)]
    {
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        if made.map(|s| s.success()).unwrap_or(false) {
            let (_, origin, w) =
                load_or_build(&m, 0.01, &SubspaceOptions::node_fits(), Some(&d)).unwrap();
            assert!(matches!(origin, SubspaceOrigin::Built(_)), "{origin:?}");
            assert!(w[0].contains("not a regular file"), "{w:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A read-only cache directory: one warning saying the subspace is not cached, and the origin
/// carries no path (so nothing prints "cached at …").
#[cfg(unix)]
#[test]
fn unwritable_cache_warns_once_and_claims_no_file() {
    use std::os::unix::fs::PermissionsExt;
    let m = beam([2, 1, 1]);
    let d = dir("readonly");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root ignores directory permissions: then the case cannot be made here.
    let probe = d.join("probe");
    if std::fs::write(&probe, b"x").is_ok() {
        let _ = std::fs::remove_file(&probe);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sub = d.join("file_in_the_way");
        std::fs::write(&sub, b"not a directory").unwrap();
        // A cache "directory" that is a regular file cannot be created, even by root.
        let (_, origin, w) =
            load_or_build(&m, 0.01, &SubspaceOptions::node_fits(), Some(&sub)).unwrap();
        assert_eq!(origin, SubspaceOrigin::Built(None), "{w:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("not cached"), "{}", w[0]);
        let _ = std::fs::remove_dir_all(&d);
        return;
    }
    let (_, origin, w) = load_or_build(&m, 0.01, &SubspaceOptions::node_fits(), Some(&d)).unwrap();
    assert_eq!(origin, SubspaceOrigin::Built(None), "{w:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("not cached"), "{}", w[0]);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// Subspace options with the H-matrix far field at tolerance `eps`.
fn hmatrix_opts(eps: f64) -> SubspaceOptions {
    let mut o = SubspaceOptions::node_fits();
    o.precompute.far_hmatrix = Some(jello_precompute::hmatrix::HMatrixOptions {
        eps,
        ..Default::default()
    });
    o
}

/// A beam long enough to have admissible (far) blocks.
fn long_beam() -> Model {
    beam([10, 2, 2])
}

/// Issue 17: a subspace with the H-matrix far field is cached and read back equal (every array
/// of the H-matrix, `S_i`, the vertex records and the statistics), and the file re-encodes to
/// the same bytes.
#[test]
fn hmatrix_subspace_round_trips_through_the_cache() {
    let m = long_beam();
    let o = hmatrix_opts(1e-3);
    let d = dir("hmatrix_roundtrip");
    let (built, origin, w) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
    assert!(w.is_empty(), "{w:?}");
    let SubspaceOrigin::Built(Some(path)) = origin else {
        panic!("an H-matrix subspace must be written to the cache: {origin:?}")
    };
    let hb = built.far_hmatrix.as_ref().expect("built with the H-matrix");
    assert!(
        !hb.matrix.blocks.is_empty() && !hb.matrix.near_pairs.is_empty(),
        "the test needs far blocks and near pairs"
    );
    let (loaded, origin, w) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(origin, SubspaceOrigin::Cache(path.clone()));
    let hl = loaded
        .far_hmatrix
        .as_ref()
        .expect("loaded with the H-matrix");
    assert_eq!(hl.matrix, hb.matrix, "H-matrix arrays");
    assert_eq!(hl.schur, hb.schur, "S_i");
    assert_eq!(loaded.vertices, built.vertices);
    assert_eq!(loaded.tree, built.tree);
    assert_eq!(
        loaded.stats, built.stats,
        "statistics, H-matrix ones included"
    );
    let key = cache_key(&m, 0.01, &o);
    let bytes = std::fs::read(&path).unwrap();
    let basis = artifact::decode(&bytes, key).unwrap();
    assert_eq!(artifact::encode(&basis, key), bytes, "re-encoded bytes");
    let _ = std::fs::remove_dir_all(&d);
}

/// The cache key separates the far fields: with and without the H-matrix, and two tolerances.
#[test]
fn cache_key_differs_with_the_hmatrix_its_eps_and_its_sketch() {
    let m = beam([3, 1, 1]);
    let plain = cache_key(&m, 0.01, &SubspaceOptions::node_fits());
    let a = cache_key(&m, 0.01, &hmatrix_opts(1e-3));
    let b = cache_key(&m, 0.01, &hmatrix_opts(1e-4));
    assert!(plain != a && plain != b && a != b, "{plain:x} {a:x} {b:x}");
    assert_eq!(a, cache_key(&m, 0.01, &hmatrix_opts(1e-3)), "stable");
    // The local sketch, and its finer truncation, give other bases for the same ε.
    let with = |f: &dyn Fn(&mut jello_precompute::hmatrix::HMatrixOptions)| {
        let mut o = hmatrix_opts(1e-3);
        f(o.precompute.far_hmatrix.as_mut().unwrap());
        cache_key(&m, 0.01, &o)
    };
    let local = with(&|h| h.sketch = jello_precompute::hmatrix::Sketch::Local);
    let local_eps = with(&|h| {
        h.sketch = jello_precompute::hmatrix::Sketch::Local;
        h.local_eps = 0.5;
    });
    assert!(
        local != a && local_eps != local,
        "{a:x} {local:x} {local_eps:x}"
    );
}

/// An edit of an H-matrix.
type Edit = dyn Fn(&mut jello_precompute::hmatrix::HMatrix);

/// Damage to the H-matrix section: a flipped byte (checksum), a truncated file, and files whose
/// checksum was recomputed after an edit (an out-of-range block id, an offset that no longer
/// steps by its block's size, a NaN coupling, the per-node list disagreeing with the blocks).
/// Each is rebuilt with one warning, never trusted and never a panic.
#[test]
fn damaged_hmatrix_artifacts_are_rebuilt() {
    let m = long_beam();
    let o = hmatrix_opts(1e-3);
    let key = cache_key(&m, 0.01, &o);
    let d = dir("hmatrix_damage");
    let (_, origin, _) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
    let SubspaceOrigin::Built(Some(path)) = origin else {
        panic!("{origin:?}")
    };
    let good = std::fs::read(&path).unwrap();
    let basis = artifact::decode(&good, key).unwrap();
    let rebuilt = |bytes: &[u8], needle: &str| {
        std::fs::write(&path, bytes).unwrap();
        let (sub, origin, w) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
        assert!(
            matches!(origin, SubspaceOrigin::Built(Some(_))),
            "{needle}: a damaged artifact was trusted: {origin:?}"
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(needle) && w[0].contains("rebuilding"),
            "{needle}: {}",
            w[0]
        );
        assert!(sub.far_hmatrix.is_some());
        // The rebuild replaced the damaged file with a good one.
        assert!(artifact::read(&path, key).unwrap().far_hmatrix.is_some());
    };
    // A byte inside the H-matrix section (the last 8 bytes are the checksum; the per-node block
    // offsets end the payload).
    let mut flipped = good.clone();
    let at = good.len() - 8 - 12;
    flipped[at] ^= 0x10;
    rebuilt(&flipped, "checksum");
    rebuilt(&good[..good.len() - 100], "truncated");
    let edits: [(&str, &Edit); 4] = [
        ("is not I < J", &|h| h.blocks[0].1 = h.rank.len() as u32),
        ("coupling offset", &|h| h.coupling_ptr[1] += 1),
        ("non-finite", &|h| h.coupling[0] = f64::NAN),
        ("per-node block lists", &|h| {
            h.node_blocks[0] = h.node_blocks[0].wrapping_add(1)
        }),
    ];
    for (needle, edit) in edits {
        let mut b = basis.clone();
        edit(b.far_hmatrix.as_mut().unwrap());
        rebuilt(&artifact::encode(&b, key), needle);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Fuzz-style: every byte of the H-matrix section's first kilobyte and last kilobyte flipped in
/// turn, the checksum recomputed so decoding reaches the content: the decoder returns a
/// value or an error and never panics, and what it accepts re-encodes to the bytes it read.
#[test]
fn rechecksummed_hmatrix_bit_flips_never_panic() {
    let m = beam([6, 2, 2]);
    let o = hmatrix_opts(1e-3);
    let key = cache_key(&m, 0.01, &o);
    let d = dir("hmatrix_fuzz");
    let (_, origin, _) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
    let SubspaceOrigin::Built(Some(path)) = origin else {
        panic!("{origin:?}")
    };
    let good = std::fs::read(&path).unwrap();
    let plain = artifact::encode(
        &jello_precompute::jgs2::Jgs2Basis {
            far_hmatrix: None,
            ..artifact::decode(&good, key).unwrap()
        },
        key,
    );
    // The section starts where the file without it would end (its flag word): payload end of
    // the plain file minus its 4-byte flag.
    let start = plain.len() - 8 - 4;
    let end = good.len() - 8;
    let (mut refused, mut accepted) = (0, 0);
    for at in (start..(start + 1024).min(end)).chain(end.saturating_sub(1024).max(start)..end) {
        let mut b = good.clone();
        b[at] ^= 0x01 << (at % 8);
        let sum = artifact::fnv1a64(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
        match artifact::decode(&b, key) {
            Ok(basis) => {
                assert_eq!(artifact::encode(&basis, key), b, "byte {at}");
                accepted += 1;
            }
            Err(_) => refused += 1,
        }
    }
    eprintln!("{refused} flips refused, {accepted} accepted (values, not structure)");
    assert!(refused > 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// A valid plain artifact re-keyed under the H-matrix options' key (and the reverse): the
/// model check notices the missing (or unexpected) far field and rebuilds.
#[test]
fn artifact_of_the_other_far_field_kind_is_rebuilt() {
    let m = long_beam();
    let d = dir("hmatrix_kind");
    let plain_path = build_into(&m, &d);
    let plain_key = cache_key(&m, 0.01, &SubspaceOptions::node_fits());
    let plain = artifact::read(&plain_path, plain_key).unwrap();
    let o = hmatrix_opts(1e-3);
    let key = cache_key(&m, 0.01, &o);
    let path = d.join(format!("jgs2-{key:016x}.bin"));
    std::fs::write(&path, artifact::encode(&plain, key)).unwrap();
    let (sub, origin, w) = load_or_build(&m, 0.01, &o, Some(&d)).unwrap();
    assert!(matches!(origin, SubspaceOrigin::Built(_)), "{origin:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("lacks an H-matrix"), "{}", w[0]);
    assert!(sub.far_hmatrix.is_some());
    // The reverse: the H-matrix artifact under the plain key.
    let with_h = artifact::read(&path, key).unwrap();
    std::fs::write(&plain_path, artifact::encode(&with_h, plain_key)).unwrap();
    let (sub, origin, w) =
        load_or_build(&m, 0.01, &SubspaceOptions::node_fits(), Some(&d)).unwrap();
    assert!(matches!(origin, SubspaceOrigin::Built(_)), "{origin:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("holds an H-matrix"), "{}", w[0]);
    assert!(sub.far_hmatrix.is_none());
    let _ = std::fs::remove_dir_all(&d);
}
