//! Results several tests of one test binary compute alike, computed once: the projected-Newton
//! state a scene reaches after some steps and the 1e-10 Newton solve of a step are the starting
//! point or the reference of tests in several modules (the drop at impact, the cube stack after
//! 12 steps, the colliding balls pressed together). Each is keyed by a hash of everything its
//! computation reads (the built scene's or model's `Debug` text, the state, the step count and
//! the iteration cap), so a test that changed anything about its scene gets its own entry. A
//! test thread that asks for an entry another thread is computing waits for it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

/// A hasher fed through `fmt::Write`, so that `Debug` text is hashed without being stored.
struct HashWriter(std::collections::hash_map::DefaultHasher);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

/// A hash of `what`'s `Debug` text and `extra`.
pub fn key(what: &[&dyn std::fmt::Debug], extra: impl Hash) -> u64 {
    use std::fmt::Write;
    let mut w = HashWriter(Default::default());
    for d in what {
        write!(w, "{d:?}\u{0}").unwrap();
    }
    extra.hash(&mut w.0);
    w.0.finish()
}

type Slot = Arc<OnceLock<Arc<dyn std::any::Any + Send + Sync>>>;

/// The value under `key`, computed by `compute` on the first call for that key (other threads
/// asking for it meanwhile wait for that computation).
pub fn once<T: Clone + Send + Sync + 'static>(key: u64, compute: impl FnOnce() -> T) -> T {
    static SLOTS: OnceLock<Mutex<HashMap<u64, Slot>>> = OnceLock::new();
    let slot = SLOTS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(key)
        .or_default()
        .clone();
    slot.get_or_init(|| Arc::new(compute()))
        .downcast_ref::<T>()
        .expect("one type per memo key")
        .clone()
}
