//! What the commands print, shared: JSON lines (every report derives
//! `Serialize`; keys come out sorted, one object per line) and `ls -l`
//! style mode strings.

use serde::Serialize;

/// Prints `v` as one line of JSON with its keys in sorted order.
pub fn print_json<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_value(v) {
        Ok(v) => println!("{v}"),
        Err(e) => eprintln!("larder: cannot print JSON: {e}"),
    }
}

/// `rwxr-x---` for permission bits.
pub fn mode_string(mode: u32) -> String {
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    bits.iter()
        .map(|&(b, c)| if mode & b != 0 { c } else { '-' })
        .collect()
}
