//! The JGS2 artifact cache on hostile files: a file whose content was poisoned and whose
//! checksum was recomputed, a valid artifact of another model planted under this model's key, a
//! directory or FIFO at the cache path, and a cache directory that cannot be written. Each is
//! rebuilt (or not cached) with exactly one warning, never trusted and never a panic.

use jello::material::MaterialModel;
use jello::problem::Model;
use jello::solver::jgs2::{cache_key, load_or_build, SubspaceOptions, SubspaceOrigin};
use jello_precompute::artifact;
use std::path::{Path, PathBuf};

mod common;

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
    let (_, origin, w) = load_or_build(m, 0.01, &SubspaceOptions::default(), Some(d)).unwrap();
    assert!(w.is_empty(), "{w:?}");
    match origin {
        SubspaceOrigin::Built(Some(p)) => p,
        o => panic!("expected a written artifact, got {o:?}"),
    }
}

/// Loads again and asserts a rebuild with one warning naming the file and containing `needle`.
fn assert_rebuilt(m: &Model, d: &Path, path: &Path, needle: &str) {
    let (sub, origin, w) = load_or_build(m, 0.01, &SubspaceOptions::default(), Some(d)).unwrap();
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
    let key = cache_key(&m, 0.01, &SubspaceOptions::default());
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
    let small_key = cache_key(&small, 0.01, &SubspaceOptions::default());
    let basis = artifact::read(&small_path, small_key).unwrap();
    let key = cache_key(&m, 0.01, &SubspaceOptions::default());
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
    let key = cache_key(&m, 0.01, &SubspaceOptions::default());
    let d = dir("special");
    let path = d.join(format!("jgs2-{key:016x}.bin"));
    std::fs::create_dir_all(&path).unwrap();
    let (_, origin, w) = load_or_build(&m, 0.01, &SubspaceOptions::default(), Some(&d)).unwrap();
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
                load_or_build(&m, 0.01, &SubspaceOptions::default(), Some(&d)).unwrap();
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
            load_or_build(&m, 0.01, &SubspaceOptions::default(), Some(&sub)).unwrap();
        assert_eq!(origin, SubspaceOrigin::Built(None), "{w:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("not cached"), "{}", w[0]);
        let _ = std::fs::remove_dir_all(&d);
        return;
    }
    let (_, origin, w) = load_or_build(&m, 0.01, &SubspaceOptions::default(), Some(&d)).unwrap();
    assert_eq!(origin, SubspaceOrigin::Built(None), "{w:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("not cached"), "{}", w[0]);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
