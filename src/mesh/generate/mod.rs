//! Mesh generators, so bundled scenes need no mesh files.

mod ball;
mod grid;

pub use ball::ball;
pub use grid::box_grid;
