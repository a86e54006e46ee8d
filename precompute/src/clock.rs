//! The one clock of jello and jello-precompute: `std::time::Instant` panics on
//! `wasm32-unknown-unknown` (no clock without a host), so a wasm build reads the browser's (or
//! node's) `performance.now()` through `web-time`, which has std's API. Everything that times
//! its work uses `clock::Instant` (jello re-exports this module as `jello::clock`); `.ci/run`
//! checks that nothing in either library names `std::time::Instant` directly.

#[cfg(not(target_arch = "wasm32"))]
pub use std::time::Instant;
#[cfg(target_arch = "wasm32")]
pub use web_time::Instant;
