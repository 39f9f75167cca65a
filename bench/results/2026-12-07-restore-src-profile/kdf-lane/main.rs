fn main() {
    let p = scrypt::Params::new(15, 8, 1).unwrap();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let mut out = [0u8; 32];
        scrypt::scrypt(b"x", b"yyyyyyyyyyyyyyyy", &p, &mut out).unwrap();
        println!("{:.4} {:02x}", t.elapsed().as_secs_f64(), out[0]);
    }
}
