//! Criterion micro-benchmarks of the hot paths: chunking, keyed hashing,
//! preparing blobs and writing packs, SQLite index lookups over a 1M-blob
//! index, and opening (decrypt, decompress, re-hash) a stored blob as restore
//! does. Kept quick (few samples, short measurement) so a regression shows
//! in one command: `cargo bench --bench micro`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use larder::Id;
use larder::chunker::{Chunker, ChunkerParams};
use larder::crypto::{Keys, MasterKey};
use larder::index::{Index, IndexPack, IndexSegment};
use larder::pack::{self, BlobType, PackEntry, PackWriter};
use std::hint::black_box;
use std::time::Duration;

fn keys() -> Keys {
    Keys::derive(&MasterKey::from_bytes([0x42; 32]))
}

/// Deterministic incompressible bytes.
fn random_bytes(n: usize, seed: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; n];
    blake3::Hasher::new()
        .update(seed)
        .finalize_xof()
        .fill(&mut v);
    v
}

/// Deterministic text-like bytes that zstd compresses about 3:1.
fn text_bytes(n: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the ",
        "chunk ",
        "index ",
        "pack ",
        "restore ",
        "backup ",
        "snapshot ",
        "fn ",
        "let ",
        "mut ",
        "struct ",
        "impl ",
        "=> ",
        "{\n",
        "}\n",
        "0x",
        "larder ",
        "blob ",
        "tree ",
        "Result<",
        ">",
        "(",
        ")",
        ";\n",
    ];
    let r = random_bytes(n, b"text");
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0;
    while out.len() < n {
        let w = WORDS[r[i % r.len()] as usize % WORDS.len()];
        out.extend_from_slice(w.as_bytes());
        if r[(i * 7 + 3) % r.len()] < 20 {
            out.extend_from_slice(&r[i % r.len()..(i % r.len() + 4).min(r.len())]);
        }
        i += 1;
    }
    out.truncate(n);
    out
}

fn quick(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("larder");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g
}

fn chunking(c: &mut Criterion) {
    let k = keys();
    let ch = Chunker::new(ChunkerParams::default(), k.gear()).unwrap();
    let data = random_bytes(16 << 20, b"chunk");
    let mut g = quick(c);
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("chunker/cut_all 16MiB", |b| {
        b.iter(|| black_box(ch.cut_all(black_box(&data))).len())
    });
    let mut buf = Vec::new();
    g.bench_function("chunker/stream 16MiB", |b| {
        b.iter(|| {
            let mut n = 0usize;
            ch.stream(
                &mut std::io::Cursor::new(&data),
                &mut buf,
                |c| {
                    n += c.len();
                    Ok(())
                },
                |e| larder::Error::io("bench", e),
            )
            .unwrap();
            n
        })
    });
    g.finish();
}

fn hashing(c: &mut Criterion) {
    let k = keys();
    let data = random_bytes(256 << 10, b"hash");
    let mut g = quick(c);
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("hash/blob_id 256KiB", |b| {
        b.iter(|| k.blob_id(black_box(&data)))
    });
    g.finish();
}

fn packing(c: &mut Criterion) {
    let k = keys();
    let text = text_bytes(256 << 10);
    let rand = random_bytes(256 << 10, b"prep");
    let mut comp = zstd::bulk::Compressor::new(3).unwrap();
    let (tid, rid) = (k.blob_id(&text), k.blob_id(&rand));
    let mut g = quick(c);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("pack/prepare_blob text 256KiB zstd3", |b| {
        b.iter(|| pack::prepare_blob(&k, Some(&mut comp), BlobType::Data, tid, &text).unwrap())
    });
    g.bench_function("pack/prepare_blob random 256KiB zstd3", |b| {
        b.iter(|| pack::prepare_blob(&k, Some(&mut comp), BlobType::Data, rid, &rand).unwrap())
    });
    // A whole 16 MiB pack: 64 prepared blobs appended, header sealed.
    let blobs: Vec<_> = (0..64u32)
        .map(|i| {
            let mut d = text.clone();
            d[..4].copy_from_slice(&i.to_le_bytes());
            (k.blob_id(&d), d)
        })
        .collect();
    g.throughput(Throughput::Bytes(64 * text.len() as u64));
    g.bench_function("pack/PackWriter 64 blobs", |b| {
        b.iter(|| {
            let mut w = PackWriter::default();
            for (id, d) in &blobs {
                w.add(pack::prepare_blob(&k, Some(&mut comp), BlobType::Data, *id, d).unwrap())
                    .unwrap();
            }
            w.finish(&k).unwrap().size
        })
    });
    g.finish();
}

fn restore_path(c: &mut Criterion) {
    let k = keys();
    let text = text_bytes(256 << 10);
    let mut comp = zstd::bulk::Compressor::new(3).unwrap();
    let mut w = PackWriter::default();
    w.add(
        pack::prepare_blob(&k, Some(&mut comp), BlobType::Data, k.blob_id(&text), &text).unwrap(),
    )
    .unwrap();
    let p = w.finish(&k).unwrap();
    let e = p.entries[0];
    let stored = &p.bytes()[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
    let mut g = quick(c);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("restore/open_blob text 256KiB", |b| {
        b.iter(|| {
            pack::open_blob(
                &k,
                &larder::dictionary::NoDictionaries,
                "bench",
                &e,
                black_box(stored),
            )
            .unwrap()
        })
    });
    g.finish();
}

fn index_lookups(c: &mut Criterion) {
    const N: u64 = 1_000_000;
    const PER_PACK: u64 = 64;
    let id = |tag: &[u8], n: u64| {
        let mut h = blake3::Hasher::new();
        h.update(tag);
        h.update(&n.to_le_bytes());
        Id(*h.finalize().as_bytes())
    };
    let dir = tempfile::tempdir().unwrap();
    let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
    let mut seg = IndexSegment::default();
    for p in 0..N / PER_PACK {
        let blobs = (0..PER_PACK)
            .map(|j| PackEntry {
                ty: BlobType::Data,
                id: id(b"blob", p * PER_PACK + j),
                offset: j * 1000,
                stored_len: 1000,
                plain_len: 2000,
                compression: 1,
            })
            .collect();
        seg.packs.push(IndexPack {
            id: id(b"pack", p),
            size: PER_PACK * 1000 + 100,
            blobs,
        });
    }
    idx.absorb(&id(b"segment", 0), &seg).unwrap();
    drop(seg);
    let hits: Vec<Id> = (0..1000u64).map(|i| id(b"blob", i * 997 % N)).collect();
    let misses: Vec<Id> = (0..1000u64).map(|i| id(b"absent", i)).collect();
    let mut g = quick(c);
    g.throughput(Throughput::Elements(1000));
    g.bench_function("index/contains hit x1000 (1M blobs)", |b| {
        b.iter(|| hits.iter().filter(|h| idx.contains(h).unwrap()).count())
    });
    g.bench_function("index/contains miss x1000 (1M blobs)", |b| {
        b.iter(|| misses.iter().filter(|h| idx.contains(h).unwrap()).count())
    });
    g.bench_function("index/lookup hit x1000 (1M blobs)", |b| {
        b.iter(|| {
            hits.iter()
                .filter(|h| idx.lookup(h).unwrap().is_some())
                .count()
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    chunking,
    hashing,
    packing,
    restore_path,
    index_lookups
);
criterion_main!(benches);
