//! render (work in progress)
