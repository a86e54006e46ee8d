//! Mesh generators, so bundled scenes need no mesh files.

mod ball;
mod grid;
mod ring;

pub use ball::ball;
pub use grid::box_grid;
pub use ring::ring;
