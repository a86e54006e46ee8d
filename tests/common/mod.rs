//! Helpers shared by integration tests.
#![allow(dead_code)]

use rand::SeedableRng;

/// A seeded RNG; the seed comes from JELLO_TEST_SEED or the clock and is printed so a failure
/// can be replayed.
pub fn rng(test: &str) -> rand_chacha::ChaCha8Rng {
    let seed = std::env::var("JELLO_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: JELLO_TEST_SEED={seed}");
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}

/// Path of a file in ../shared/meshes when present.
pub fn shared_mesh(name: &str) -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/meshes")
        .join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("note: {} not present, skipping that part", p.display());
        None
    }
}
