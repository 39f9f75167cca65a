//! Does memmap2 help larder read? Reads the same files two ways, with a
//! warm page cache, and hashes every byte (BLAKE3, the work a backup or a
//! `check --read-data` does first, so the bytes are really touched):
//!
//! - `read`: `read` into one reused buffer of 4 MiB, as the archiver and
//!   the local backend do;
//! - `mmap`: the whole file mapped (memmap2), hashed from the mapping.
//!
//! Each set of files is read `--rounds` times per mode, the modes taking
//! turns; prints one JSON line per set and mode with the best and median
//! MiB/s. Sets are given as `NAME=PATH` (a file or a directory, walked).
//!
//! ```sh
//! cargo run --release --example mmap_read -- --rounds 5 \
//!     corpus=/var/tmp/tree random=/var/tmp/random.bin packs=/srv/repo/packs
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn files(root: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect()
}

fn by_read(paths: &[PathBuf], buf: &mut [u8]) -> std::io::Result<u64> {
    let mut total = 0;
    for p in paths {
        let mut f = std::fs::File::open(p)?;
        let mut h = blake3::Hasher::new();
        loop {
            let n = f.read(buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            total += n as u64;
        }
        std::hint::black_box(h.finalize());
    }
    Ok(total)
}

fn by_mmap(paths: &[PathBuf]) -> std::io::Result<u64> {
    let mut total = 0;
    for p in paths {
        let f = std::fs::File::open(p)?;
        if f.metadata()?.len() == 0 {
            continue;
        }
        // SAFETY: the files are this benchmark's own copies, which nothing
        // changes while they are mapped; a file changed underneath would
        // only make the hash differ (the mapping stays valid memory).
        let m = unsafe { memmap2::Mmap::map(&f)? };
        let h = blake3::hash(&m);
        std::hint::black_box(h);
        total += m.len() as u64;
    }
    Ok(total)
}

fn main() -> std::io::Result<()> {
    let mut rounds = 5usize;
    let mut sets: Vec<(String, Vec<PathBuf>)> = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--rounds" {
            rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
            continue;
        }
        let Some((name, path)) = a.split_once('=') else {
            eprintln!("usage: mmap_read [--rounds N] NAME=PATH...");
            std::process::exit(2);
        };
        sets.push((name.to_string(), files(Path::new(path))));
    }
    let mut buf = vec![0u8; 4 << 20];
    for (name, paths) in &sets {
        // Warm the page cache once.
        let bytes = by_read(paths, &mut buf)?;
        let mut read_mibs = Vec::new();
        let mut mmap_mibs = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            by_read(paths, &mut buf)?;
            read_mibs.push(bytes as f64 / t.elapsed().as_secs_f64() / (1 << 20) as f64);
            let t = Instant::now();
            by_mmap(paths)?;
            mmap_mibs.push(bytes as f64 / t.elapsed().as_secs_f64() / (1 << 20) as f64);
        }
        for (mode, v) in [("read", &mut read_mibs), ("mmap", &mut mmap_mibs)] {
            v.sort_by(f64::total_cmp);
            println!(
                "{{\"set\":\"{name}\",\"files\":{},\"bytes\":{bytes},\"mode\":\"{mode}\",\"median_mib_s\":{:.1},\"best_mib_s\":{:.1},\"samples\":{:?}}}",
                paths.len(),
                v[v.len() / 2],
                v[v.len() - 1],
                v.iter()
                    .map(|x| (x * 10.0).round() / 10.0)
                    .collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}
