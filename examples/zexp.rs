// scratch: zstd parameter exploration (not committed)
use larder::chunker::{Chunker, ChunkerParams};
use larder::crypto::{Keys, MasterKey};
use std::time::Instant;
use zstd::zstd_safe::{CParameter, Strategy};
fn main() {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    let keys = Keys::derive(&MasterKey::from_bytes([0x5a; 32]));
    let chunker = Chunker::new(ChunkerParams::default(), keys.gear()).unwrap();
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for d in &dirs {
        for e in walkdir::WalkDir::new(d).sort_by_file_name() {
            let e = e.unwrap();
            if !e.file_type().is_file() {
                continue;
            }
            let data = std::fs::read(e.path()).unwrap();
            let mut off = 0;
            while off < data.len() {
                let n = chunker.cut(&data[off..]);
                chunks.push(data[off..off + n].to_vec());
                off += n;
            }
        }
    }
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    eprintln!("{} chunks {} bytes", chunks.len(), total);
    // (name, level, strategy, wlog, hlog, clog, minmatch)
    let cfgs: Vec<(&str, i32, Vec<(CParameter,)>)> = vec![];
    let _ = cfgs;
    let specs: Vec<(String, i32, Option<(Strategy, u32, u32, u32, u32)>)> = vec![
        ("L1".into(), 1, None),
        ("L2".into(), 2, None),
        ("L3".into(), 3, None),
        ("L4".into(), 4, None),
        (
            "dfast w18 h15 c14 m5".into(),
            3,
            Some((Strategy::ZSTD_dfast, 18, 15, 14, 5)),
        ),
        (
            "dfast w18 h14 c14 m5".into(),
            3,
            Some((Strategy::ZSTD_dfast, 18, 14, 14, 5)),
        ),
        (
            "dfast w18 h16 c16 m5".into(),
            3,
            Some((Strategy::ZSTD_dfast, 18, 16, 16, 5)),
        ),
        (
            "dfast w18 h16 c16 m6".into(),
            3,
            Some((Strategy::ZSTD_dfast, 18, 16, 16, 6)),
        ),
        (
            "fast w18 h16 c16 m5".into(),
            1,
            Some((Strategy::ZSTD_fast, 18, 16, 16, 5)),
        ),
        (
            "fast w18 h17 m5".into(),
            1,
            Some((Strategy::ZSTD_fast, 18, 17, 16, 5)),
        ),
        (
            "fast w18 h15 m4".into(),
            1,
            Some((Strategy::ZSTD_fast, 18, 15, 16, 4)),
        ),
    ];
    let only: Option<String> = std::env::var("ONLY").ok();
    for (name, level, p) in specs {
        if let Some(o) = &only {
            if !name.contains(o.as_str()) {
                continue;
            }
        }
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        if let Some((s, w, h, cl, m)) = p {
            c.set_parameter(zstd::stream::raw::CParameter::Strategy(s))
                .unwrap();
            c.set_parameter(zstd::stream::raw::CParameter::WindowLog(w))
                .unwrap();
            c.set_parameter(zstd::stream::raw::CParameter::HashLog(h))
                .unwrap();
            c.set_parameter(zstd::stream::raw::CParameter::ChainLog(cl))
                .unwrap();
            c.set_parameter(zstd::stream::raw::CParameter::MinMatch(m))
                .unwrap();
        }
        let mut out = Vec::with_capacity(2 << 20);
        let t = Instant::now();
        let mut stored = 0usize;
        let mut raw = 0usize;
        let mut rawb = 0usize;
        let mut rawt = 0f64;
        for ch in &chunks {
            out.clear();
            let t1 = Instant::now();
            c.compress_to_buffer(ch, &mut out).unwrap();
            if out.len() * 100 < ch.len() * 97 {
                stored += out.len();
            } else {
                stored += ch.len().min(out.len());
                raw += 1;
                rawb += ch.len();
                rawt += t1.elapsed().as_secs_f64();
            }
        }
        eprintln!(
            "  incompressible(>97%): {raw} chunks {} MiB, {:.2} s",
            rawb >> 20,
            rawt
        );
        let dt = t.elapsed().as_secs_f64();
        println!(
            "{name:28} {:7.1} MiB/s  {:.4} ratio  raw {raw}",
            total as f64 / dt / 1048576.0,
            stored as f64 / total as f64
        );
    }
}
