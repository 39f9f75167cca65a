//! Measures each stage of a cold backup alone, on one core, over the same
//! files the benchmark backs up: walk (lstat), read (into memory from the page
//! cache), chunk (FastCDC with larder's parameters), hash (keyed BLAKE3 of
//! each chunk), compress (zstd at the repository's level, one reused context,
//! against a dictionary trained as a fresh repository's first backup trains
//! one: from the first bytes of the first chunks; `--no-dict` for none) and
//! encrypt (XChaCha20-Poly1305 of what would be stored). The benchmark sums
//! the per-byte costs of read..encrypt to bound what 2 cores allow. Training
//! the dictionary is a one-time cost, timed apart (`train`, not in the sum).
//!
//! Files are processed in batches (default 256 MiB) so memory stays bounded;
//! each stage runs over the whole batch before the next one starts, so the
//! timings do not interleave. Prints one JSON line per stage.
//!
//! ```sh
//! cargo run --release --example stages -- --level 3 DIR...
//! ```

use larder::chunker::{Chunker, ChunkerParams};
use larder::crypto::{Keys, MasterKey};
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Stage {
    time: Duration,
}

fn main() {
    let mut level = 3i32;
    let mut with_dict = true;
    let mut batch_bytes = 256usize << 20;
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--level" => level = it.next().and_then(|v| v.parse().ok()).unwrap_or(3),
            "--no-dict" => with_dict = false,
            "--batch-mib" => {
                batch_bytes = it
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(256)
                    << 20
            }
            _ => dirs.push(PathBuf::from(a)),
        }
    }
    if dirs.is_empty() {
        eprintln!("usage: stages [--level N] [--no-dict] [--batch-mib M] DIR...");
        std::process::exit(2);
    }

    let keys = Keys::derive(&MasterKey::from_bytes([0x5a; 32]));
    let chunker = Chunker::new(ChunkerParams::default(), keys.gear()).expect("chunker");
    let mut compressor = zstd::bulk::Compressor::new(level).expect("zstd level");
    let ad = [0u8; 33];

    // Walk: the cost of finding and stat-ing every file.
    let t = Instant::now();
    let mut files: Vec<PathBuf> = Vec::new();
    for d in &dirs {
        for e in walkdir::WalkDir::new(d).sort_by_file_name() {
            let e = e.expect("walk");
            if e.file_type().is_file() {
                let _ = e.metadata().expect("lstat");
                files.push(e.into_path());
            }
        }
    }
    let walk = t.elapsed();

    let (mut read, mut chunk, mut hash, mut compress, mut encrypt, mut train) = (
        Stage::default(),
        Stage::default(),
        Stage::default(),
        Stage::default(),
        Stage::default(),
        Stage::default(),
    );
    let mut trained = !with_dict;
    let mut total = 0u64;
    let mut stored = 0u64;
    let mut nchunks = 0u64;
    let mut batch: Vec<u8> = Vec::with_capacity(batch_bytes + (1 << 20));
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut cbuf: Vec<u8> = Vec::new();
    let mut sealed: Vec<u8> = Vec::new();
    let mut idx = 0;
    while idx < files.len() {
        batch.clear();
        spans.clear();
        // Read: open, read() into the batch, close.
        let t = Instant::now();
        while idx < files.len() && batch.len() < batch_bytes {
            let start = batch.len();
            if let Ok(mut f) = std::fs::File::open(&files[idx]) {
                let _ = f.read_to_end(&mut batch);
            }
            spans.push((start, batch.len()));
            idx += 1;
        }
        read.time += t.elapsed();
        total += batch.len() as u64;

        // Chunk each file.
        let t = Instant::now();
        let mut chunks: Vec<(usize, usize)> = Vec::new();
        for &(s, e) in &spans {
            let mut p = s;
            for n in chunker.cut_all(&batch[s..e]) {
                chunks.push((p, p + n));
                p += n;
            }
        }
        chunk.time += t.elapsed();
        nchunks += chunks.len() as u64;

        // Hash each chunk.
        let t = Instant::now();
        let mut x = 0u8;
        for &(s, e) in &chunks {
            x ^= keys.blob_id(&batch[s..e]).0[0];
        }
        std::hint::black_box(x);
        hash.time += t.elapsed();

        // The first batch trains the dictionary, as larder's first backup
        // does from its first new blobs.
        if !trained {
            trained = true;
            let t = Instant::now();
            // The samples as a backup takes them (larder::dictionary::Sampler).
            let sampler = larder::dictionary::Sampler::new(larder::dictionary::SAMPLE_BUDGET);
            let samples = chunks
                .iter()
                .find_map(|&(s, e)| sampler.offer(&batch[s..e]));
            if let Some(d) =
                samples.and_then(|(data, sizes)| larder::dictionary::train(&data, &sizes))
            {
                compressor =
                    zstd::bulk::Compressor::with_dictionary(level, &d).expect("dictionary");
                compressor
                    .set_parameter(zstd::zstd_safe::CParameter::ForceAttachDict(
                        zstd::zstd_safe::DictAttachPref::ForceAttach,
                    ))
                    .expect("attach");
            }
            train.time += t.elapsed();
        }

        // Compress each chunk; keep the output only where it is smaller, as
        // larder does.
        let t = Instant::now();
        let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(chunks.len());
        for &(s, e) in &chunks {
            let plain = &batch[s..e];
            cbuf.clear();
            cbuf.reserve(zstd::zstd_safe::compress_bound(plain.len()));
            let ok = compressor.compress_to_buffer(plain, &mut cbuf).is_ok();
            out.push((ok && cbuf.len() < plain.len()).then(|| cbuf.clone()));
        }
        compress.time += t.elapsed();

        // Encrypt what would be stored.
        let t = Instant::now();
        for (&(s, e), c) in chunks.iter().zip(&out) {
            sealed.clear();
            let body = c.as_deref().unwrap_or(&batch[s..e]);
            keys.seal_into(&ad, body, &mut sealed).expect("seal");
            stored += sealed.len() as u64;
        }
        encrypt.time += t.elapsed();
    }

    let line = |name: &str, d: Duration| {
        println!(
            "{{\"stage\":\"{name}\",\"bytes\":{total},\"seconds\":{:.6},\"files\":{},\"chunks\":{nchunks},\"stored\":{stored},\"level\":{level}}}",
            d.as_secs_f64(),
            files.len()
        );
    };
    line("walk", walk);
    line("read", read.time);
    line("chunk", chunk.time);
    line("hash", hash.time);
    line("compress", compress.time);
    line("encrypt", encrypt.time);
    if with_dict {
        line("train", train.time);
    }
}
