//! Writes a new age X25519 identity file (`AGE-SECRET-KEY-1...`, with its
//! public key in a comment) to the path given, and prints the recipient
//! (`age1...`) on stdout. The benchmark (`scripts/bench.sh`, part `snaps`)
//! adds the recipient as a key of a repository and makes its 1,000
//! snapshots with `--identity`, which opens the repository without the
//! passphrase's key derivation (about half a second per command).
//!
//! ```sh
//! cargo run --release --example age_keygen -- /path/to/identity.txt
//! ```

use age::secrecy::ExposeSecret;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: age_keygen IDENTITY_FILE   (prints the recipient)");
        std::process::exit(2)
    };
    let id = age::x25519::Identity::generate();
    let recipient = id.to_public().to_string();
    let text = format!(
        "# public key: {recipient}\n{}\n",
        id.to_string().expose_secret()
    );
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("age_keygen: {path}: {e}");
        std::process::exit(1)
    }
    println!("{recipient}");
}
