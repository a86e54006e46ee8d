//! Read-back images.

use crate::error::{JelloError, Result};

/// An 8-bit RGBA image, rows top to bottom, sRGB-encoded colour, alpha 255 everywhere the
/// renderer wrote. `pixels.len() == 4 * width * height`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbaImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Tightly packed RGBA bytes, row-major from the top-left corner.
    pub pixels: Vec<u8>,
}

impl RgbaImage {
    /// The RGBA value at column `x`, row `y` (origin top left), or `None` outside the image.
    pub fn get(&self, x: u32, y: u32) -> Option<[u8; 4]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = 4 * (y as usize * self.width as usize + x as usize);
        let p = self.pixels.get(i..i + 4)?;
        Some([p[0], p[1], p[2], p[3]])
    }

    /// Checks that the buffer length matches the dimensions.
    pub fn validate(&self) -> Result<()> {
        let want = 4 * self.width as usize * self.height as usize;
        if self.width == 0 || self.height == 0 || self.pixels.len() != want {
            return Err(JelloError::Invalid(format!(
                "image: {}×{} needs {want} bytes, has {}",
                self.width,
                self.height,
                self.pixels.len()
            )));
        }
        Ok(())
    }
}
