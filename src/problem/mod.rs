//! problem (work in progress)
