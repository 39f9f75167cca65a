//! Grows an existing repository's index with synthetic blobs, through the
//! library API, for the benchmark's flatness check (issue 5): "with 10
//! million blobs in the index, backup and restore use at most 1.2x the RSS
//! they use on a fresh repository, and open the repository in under a
//! second".
//!
//! It writes `--segments` index segments of `--blobs` blobs each, spread over
//! fake packs of `--per-pack` blobs (about 16 MiB of 256 KiB chunks, as real
//! packs hold). The packs do not exist: only the index knows them, which is
//! all that opening, deduplicating against and restoring from the repository
//! consult. Blob and pack IDs are BLAKE3 of a seed and a counter, so they
//! never collide with real blobs (keyed hashes) nor with each other.
//!
//! Nothing is absorbed into the local cache here: the next `larder` command
//! that opens the repository absorbs the new segments (time the second open).
//!
//! ```sh
//! LARDER_PASSWORD=... cargo run --release --example synth_index -- \
//!     --repo /path/to/repo --segments 100 --blobs 100000
//! ```

use larder::Id;
use larder::backend::LocalBackend;
use larder::crypto::Keys;
use larder::index::{self, IndexPack, IndexSegment};
use larder::keys::{self, Credential};
use larder::pack::{BlobType, PackEntry};
use std::path::PathBuf;
use std::time::Instant;

struct Args {
    repo: PathBuf,
    segments: u64,
    blobs: u64,
    per_pack: u64,
    seed: String,
}

fn usage() -> ! {
    eprintln!(
        "usage: synth_index --repo DIR [--segments 100] [--blobs 100000] [--per-pack 64] [--seed S]\n\
         (passphrase from LARDER_PASSWORD)"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        repo: PathBuf::new(),
        segments: 100,
        blobs: 100_000,
        per_pack: 64,
        seed: "larder synthetic index".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<u64>().unwrap_or_else(|_| usage());
        match k.as_str() {
            "--repo" => a.repo = PathBuf::from(v),
            "--segments" => a.segments = num(&v),
            "--blobs" => a.blobs = num(&v),
            "--per-pack" => a.per_pack = num(&v).max(1),
            "--seed" => a.seed = v,
            _ => usage(),
        }
    }
    if a.repo.as_os_str().is_empty() {
        usage()
    }
    a
}

/// A deterministic fake ID: BLAKE3 of the seed, a domain tag and a counter.
fn fake_id(seed: &str, tag: &[u8], n: u64) -> Id {
    let mut h = blake3::Hasher::new();
    h.update(seed.as_bytes());
    h.update(tag);
    h.update(&n.to_le_bytes());
    Id(*h.finalize().as_bytes())
}

/// One synthetic segment: blobs `first..first + count`.
fn segment(a: &Args, first: u64, count: u64) -> IndexSegment {
    let mut seg = IndexSegment::default();
    let mut n = first;
    let end = first + count;
    while n < end {
        let in_pack = a.per_pack.min(end - n);
        let mut blobs = Vec::with_capacity(in_pack as usize);
        let mut offset = 0u64;
        for k in 0..in_pack {
            // Sizes vary like real chunks: 64 KiB .. 1 MiB plaintext,
            // stored a little smaller (compressed) plus the seal.
            let x = fake_id(&a.seed, b"size", n + k).0;
            let plain_len = (64 << 10) + u32::from_le_bytes([x[0], x[1], x[2], 0]) % (960 << 10);
            let stored_len = plain_len / 2 + 40;
            blobs.push(PackEntry {
                ty: BlobType::Data,
                id: fake_id(&a.seed, b"blob", n + k),
                offset,
                stored_len,
                plain_len,
                compression: 1,
            });
            offset += stored_len as u64;
        }
        seg.packs.push(IndexPack {
            id: fake_id(&a.seed, b"pack", n),
            size: offset + 1024,
            blobs,
        });
        n += in_pack;
    }
    seg
}

fn main() -> larder::Result<()> {
    let a = parse_args();
    let pass = std::env::var("LARDER_PASSWORD").unwrap_or_else(|_| {
        eprintln!("synth_index: set LARDER_PASSWORD");
        std::process::exit(2)
    });
    let backend = LocalBackend::new(&a.repo);
    let t = Instant::now();
    let cred = Credential::passphrase(pass);
    let (_, _, keys) = keys::find_key(&backend, &cred, &mut Vec::new(), |m| Ok(Keys::derive(m)))?;
    let t_key = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for s in 0..a.segments {
        let seg = segment(&a, s * a.blobs, a.blobs);
        index::write_segment(&backend, &keys, &seg)?;
    }
    let total = a.segments * a.blobs;
    println!(
        "{{\"segments\":{},\"blobs\":{},\"per_pack\":{},\"key_seconds\":{:.3},\"write_seconds\":{:.3}}}",
        a.segments,
        total,
        a.per_pack,
        t_key,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
