//! scene (work in progress)
