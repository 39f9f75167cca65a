use std::time::Instant;
use zstd::zstd_safe::{CParameter, DictAttachPref};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&a[1]).unwrap();
    let dict = std::fs::read(&a[2]).unwrap();
    let block: usize = a[3].parse().unwrap();
    let rounds: usize = a[4].parse().unwrap();
    let level: i32 = a.get(5).map(|l| l.parse().unwrap()).unwrap_or(1);
    let mut plain = zstd::bulk::Compressor::new(level).unwrap();
    let mut withd = zstd::bulk::Compressor::with_dictionary(level, &dict).unwrap();
    withd.set_parameter(CParameter::ForceAttachDict(DictAttachPref::ForceAttach)).unwrap();
    let mut out = Vec::with_capacity(2 << 20);
    for r in 0..rounds {
        for which in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
            let c = if which == 0 { &mut plain } else { &mut withd };
            let t = Instant::now();
            let mut total = 0usize;
            for b in data.chunks(block) {
                out.clear();
                c.compress_to_buffer(b, &mut out).unwrap();
                total += out.len().min(b.len());
            }
            let s = t.elapsed().as_secs_f64();
            println!("{} {:.3} s {:.1} MB/s {}", if which == 0 { "plain" } else { "dict " }, s, data.len() as f64 / s / 1e6, total);
        }
    }
}
