//! material (work in progress)
