//! Tests of the `jello` binary (`CARGO_BIN_EXE_jello`): arguments, run directories, errors,
//! signals, the residual picture; one module per former `tests/<name>.rs`
//! (`cargo test --test cli <name>::`).
//!
//! One binary instead of one per file: each integration-test binary links the whole
//! library, and on a 2-core machine the links dominated the suite's build.

#[path = "../common/mod.rs"]
mod common;

mod cli_crossings;
mod cli_errors;
mod cli_jgs2;
mod cli_run;
mod cli_usage;
mod cli_work;
mod residual_picture;
