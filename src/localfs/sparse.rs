//! Reading source files without reading their holes: a reader that asks the
//! filesystem for data regions (`SEEK_DATA`/`SEEK_HOLE`) and produces the
//! zeros of a hole without any read, so a 100 GiB sparse image costs little
//! I/O. Only files with fewer allocated blocks than their size use it.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

/// Reads a file front to back, filling holes with zeros without reading them.
pub struct SparseReader<'f> {
    file: &'f File,
    pos: u64,
    /// End of the current data region (reads allowed up to here).
    data_end: u64,
    /// End of the current hole (zeros up to here).
    hole_end: u64,
    len: u64,
}

impl<'f> SparseReader<'f> {
    /// A reader over `file` of `len` bytes, starting at offset 0.
    pub fn new(file: &'f File, len: u64) -> Self {
        SparseReader {
            file,
            pos: 0,
            data_end: 0,
            hole_end: 0,
            len,
        }
    }

    /// Finds the region starting at `pos`: data up to `data_end`, or a hole
    /// up to `hole_end`.
    fn locate(&mut self) -> io::Result<()> {
        use nix::unistd::{Whence, lseek};
        let fd = self.file;
        let off = self.pos as i64;
        match lseek(fd, off, Whence::SeekData) {
            Ok(d) if d as u64 > self.pos => {
                self.hole_end = (d as u64).min(self.len);
            }
            Ok(_) => {
                let h = lseek(fd, off, Whence::SeekHole).map_err(io::Error::from)?;
                self.data_end = (h as u64).min(self.len).max(self.pos + 1);
            }
            // ENXIO: no data after pos: the rest is a hole.
            Err(nix::errno::Errno::ENXIO) => self.hole_end = self.len,
            // Filesystems without SEEK_DATA: treat everything as data.
            Err(_) => self.data_end = self.len,
        }
        Ok(())
    }
}

impl Read for SparseReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len || buf.is_empty() {
            return Ok(0);
        }
        if self.pos >= self.data_end && self.pos >= self.hole_end {
            self.locate()?;
        }
        if self.pos < self.hole_end {
            let n = ((self.hole_end - self.pos) as usize).min(buf.len());
            buf[..n].fill(0);
            self.pos += n as u64;
            return Ok(n);
        }
        let want = ((self.data_end - self.pos) as usize).min(buf.len());
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        if n == 0 {
            // The file shrank under us; stop here (the caller notices).
            self.len = self.pos;
        }
        Ok(n)
    }
}
