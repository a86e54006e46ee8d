//! IPC contact between deformable surfaces (Li et al. 2020, "Incremental Potential Contact"):
//! the numerical core of each primitive pair — squared distances with their closest-feature
//! classification and exact derivatives ([`distance`]), the edge–edge mollifier ([`mollifier`]),
//! the log barrier and its adaptive stiffness ([`barrier`]), and additive continuous collision
//! detection for the step filter ([`ccd`]). All f64, SI units (distances in m, squared
//! distances in m²).

pub mod barrier;
pub mod ccd;
pub mod distance;
pub mod mollifier;
