use std::time::Instant;
fn main() {
    let p = scrypt::Params::new(15, 8, 4).unwrap();
    let mut out = [0u8; 32];
    let t = Instant::now();
    scrypt::scrypt(b"password", b"salt-of-sixteen!", &p, &mut out).unwrap();
    println!("{:.3} s {:02x}{:02x}", t.elapsed().as_secs_f64(), out[0], out[1]);
}
