//! A byte cursor shared by the mesh readers: whitespace-separated tokens with 1-based line
//! tracking for the text formats, raw fixed-size records for the binary ones. Every failure is a
//! [`JelloError`] naming the file and the line (text) or the record being read (binary).

use crate::error::{JelloError, Result};
use std::path::{Path, PathBuf};

/// Reads a file whole; the readers work on the bytes in memory (meshes are at most a few hundred
/// MB and this keeps the parsers simple and fast). Anything but a regular file of at most
/// [`crate::limits::MAX_MESH_FILE_BYTES`] is refused from its metadata, before it is opened.
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    crate::limits::read_capped(path, crate::limits::MAX_MESH_FILE_BYTES)
}

/// The UTF-8 byte-order mark some editors put at the start of text files.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Cursor over a file's bytes.
pub(crate) struct Cursor<'a> {
    pub path: PathBuf,
    data: &'a [u8],
    pos: usize,
    /// 1-based line of the byte at `pos`.
    line: usize,
    /// Line of the start of the last token returned.
    tok_line: usize,
    /// `#` starts a comment running to the end of the line (TetGen, MEDIT, VTK header lines).
    hash_comments: bool,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`, past a UTF-8 byte-order mark if there is one (byte
    /// offsets in messages stay those of the file).
    pub fn new(path: &Path, data: &'a [u8]) -> Self {
        Cursor {
            path: path.to_path_buf(),
            data,
            pos: if data.starts_with(BOM) { BOM.len() } else { 0 },
            line: 1,
            tok_line: 1,
            hash_comments: false,
        }
    }

    /// Treat `#` as the start of a comment.
    pub fn with_hash_comments(mut self) -> Self {
        self.hash_comments = true;
        self
    }

    /// Line of the last token read (1-based).
    pub fn token_line(&self) -> usize {
        self.tok_line
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// A parse error at the last token's line.
    pub fn err(&self, msg: impl Into<String>) -> JelloError {
        JelloError::parse(&self.path, self.tok_line, msg)
    }

    /// A parse error at an explicit line.
    pub fn err_at(&self, line: usize, msg: impl Into<String>) -> JelloError {
        JelloError::parse(&self.path, line, msg)
    }

    /// An error in a binary block: names the byte offset instead of a line.
    pub fn err_binary(&self, msg: impl Into<String>) -> JelloError {
        JelloError::mesh(
            &self.path,
            format!("byte offset {}: {}", self.pos, msg.into()),
        )
    }

    fn skip_ws(&mut self) {
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            if c == b'\n' {
                self.line += 1;
                self.pos += 1;
            } else if c.is_ascii_whitespace() {
                self.pos += 1;
            } else if c == b'#' && self.hash_comments {
                while self.pos < self.data.len() && self.data[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    /// Next whitespace-separated token, or `None` at end of file.
    pub fn next_token(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        if self.pos >= self.data.len() {
            return None;
        }
        let start = self.pos;
        self.tok_line = self.line;
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            if c.is_ascii_whitespace() || (c == b'#' && self.hash_comments) {
                break;
            }
            self.pos += 1;
        }
        Some(&self.data[start..self.pos])
    }

    /// Looks at the next token without consuming it.
    pub fn peek_token(&mut self) -> Option<&'a [u8]> {
        let (pos, line, tok_line) = (self.pos, self.line, self.tok_line);
        let t = self.next_token();
        self.pos = pos;
        self.line = line;
        self.tok_line = tok_line;
        t
    }

    /// Next token; end of file is a "truncated" error mentioning `what`.
    pub fn token(&mut self, what: &str) -> Result<&'a [u8]> {
        match self.next_token() {
            Some(t) => Ok(t),
            None => Err(JelloError::parse(
                &self.path,
                self.line,
                format!("file truncated: expected {what}, found end of file"),
            )),
        }
    }

    /// Next token as text (lossy for non-UTF-8 garbage, which then fails to parse anyway).
    pub fn word(&mut self, what: &str) -> Result<String> {
        Ok(String::from_utf8_lossy(self.token(what)?).into_owned())
    }

    /// Next token as a non-negative integer.
    pub fn usize(&mut self, what: &str) -> Result<usize> {
        let t = self.token(what)?;
        parse_usize(t).ok_or_else(|| {
            self.err(format!(
                "expected {what} (a non-negative integer), found `{}`",
                show(t)
            ))
        })
    }

    /// Next token as a signed integer.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        let t = self.token(what)?;
        parse_i64(t)
            .ok_or_else(|| self.err(format!("expected {what} (an integer), found `{}`", show(t))))
    }

    /// Next token as a finite float (NaN and infinities are refused here, naming the line).
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        let t = self.token(what)?;
        let v = std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| self.err(format!("expected {what} (a number), found `{}`", show(t))))?;
        if !v.is_finite() {
            return Err(self.err(format!("{what} is not finite (`{}`)", show(t))));
        }
        Ok(v)
    }

    /// The rest of the current line (without the newline), advancing past it; `None` at end of
    /// file.
    pub fn line_text(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.data.len() {
            return None;
        }
        let start = self.pos;
        self.tok_line = self.line;
        while self.pos < self.data.len() && self.data[self.pos] != b'\n' {
            self.pos += 1;
        }
        let end = self.pos;
        if self.pos < self.data.len() {
            self.pos += 1;
            self.line += 1;
        }
        let s = &self.data[start..end];
        Some(s.strip_suffix(b"\r").unwrap_or(s))
    }

    /// Skips to just after the next newline (the rest of the current line).
    pub fn skip_line(&mut self) {
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
                return;
            }
        }
    }

    /// Refuses a declared item count that the remaining bytes cannot possibly hold, before
    /// anything is allocated for it. `min_bytes` is the least number of bytes one item takes
    /// (e.g. for text, 2 bytes per number: a digit and a separator).
    pub fn check_count(&self, count: usize, min_bytes: usize, what: &str) -> Result<()> {
        let need = count.saturating_mul(min_bytes);
        // The last item may lack its trailing separator.
        if need > self.remaining().saturating_add(1) {
            return Err(self.err(format!(
                "declared {count} {what} but only {} bytes remain in the file (truncated or corrupt count)",
                self.remaining()
            )));
        }
        Ok(())
    }

    /// Refuses a declared count above `cap` (one of the [`crate::limits`] caps, named `name`).
    pub fn check_cap(&self, count: usize, cap: usize, what: &str, name: &str) -> Result<()> {
        if count > cap {
            return Err(self.err(format!(
                "declared {count} {what}, more than the cap of {cap} (jello::limits::{name})"
            )));
        }
        Ok(())
    }

    /// Takes `n` raw bytes (binary blocks).
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.err_binary(format!(
                "file truncated: {what} needs {n} bytes, {} remain",
                self.remaining()
            )));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.line += s.iter().filter(|&&c| c == b'\n').count();
        self.pos += n;
        Ok(s)
    }

    /// Advances to just after the first occurrence of `pat` (used to skip unknown sections).
    /// Returns false (cursor at end) when not found.
    pub fn skip_past(&mut self, pat: &[u8]) -> bool {
        let hay = &self.data[self.pos..];
        match hay.windows(pat.len()).position(|w| w == pat) {
            Some(i) => {
                let _ = self.bytes(i + pat.len(), "section");
                true
            }
            None => {
                let _ = self.bytes(hay.len(), "section");
                false
            }
        }
    }
}

/// Parses an ASCII unsigned integer.
pub(crate) fn parse_usize(t: &[u8]) -> Option<usize> {
    if t.is_empty() || t.len() > 19 {
        return None;
    }
    let mut v: usize = 0;
    for &c in t {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as usize;
    }
    Some(v)
}

/// Parses an ASCII signed integer.
pub(crate) fn parse_i64(t: &[u8]) -> Option<i64> {
    match t.first()? {
        b'-' => parse_usize(&t[1..]).map(|v| -(v as i64)),
        b'+' => parse_usize(&t[1..]).map(|v| v as i64),
        _ => parse_usize(t).map(|v| v as i64),
    }
}

/// A token shortened for an error message.
pub(crate) fn show(t: &[u8]) -> String {
    let s = String::from_utf8_lossy(t);
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// Little- or big-endian fixed-size binary values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn i32(self, b: &[u8]) -> i32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => i32::from_le_bytes(a),
            Endian::Big => i32::from_be_bytes(a),
        }
    }
    pub fn u64(self, b: &[u8]) -> u64 {
        let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
    pub fn i64(self, b: &[u8]) -> i64 {
        self.u64(b) as i64
    }
    pub fn f64(self, b: &[u8]) -> f64 {
        f64::from_bits(self.u64(b))
    }
    pub fn f32(self, b: &[u8]) -> f32 {
        f32::from_bits(self.i32(b) as u32)
    }
    /// An unsigned integer of `size` bytes (4 or 8).
    pub fn uint(self, b: &[u8], size: usize) -> u64 {
        if size == 4 {
            self.i32(b) as u32 as u64
        } else {
            self.u64(b)
        }
    }
}
