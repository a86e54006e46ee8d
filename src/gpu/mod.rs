//! gpu (work in progress)
