//! What the commands print, shared: JSON lines (every report derives
//! `Serialize`; keys come out sorted, one object per line) and `ls -l`
//! style mode strings.

use serde::Serialize;

/// The exit code when stdout's reader went away: 128 + SIGPIPE, what a
/// shell reports for a program that signal ended.
pub const BROKEN_PIPE_EXIT: i32 = 141;

/// Whether a panic's payload is `println!`'s on a closed stdout.
pub fn is_broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
}

/// Keeps the panic message of a closed stdout off the terminal (the
/// command stops quietly, see `cli::main`); every other panic is shown as
/// before.
pub fn quiet_broken_pipe() {
    let shown = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(info.payload()) {
            shown(info);
        }
    }));
}

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

/// `s` safe to print on a terminal: control characters (C0, DEL, C1: the
/// escape sequences a hostile file name could use to rewrite the screen)
/// are shown escaped, as `\n`, `\t`, `\r` or `\x1b`/`\u{9b}`. Everything
/// else, including non-ASCII text, is unchanged. JSON output does not use
/// this: it stays exact.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Warns of the chosen snapshots another process removed (or replaced)
/// before a command that changes snapshots held its lock, and gives the
/// exit code: 1 when there were any (the change asked for was not made to
/// them), else 0.
pub fn warn_vanished(ids: &[String]) -> i32 {
    for id in ids {
        eprintln!(
            "warning: snapshot {} was removed or replaced by another process after it was \
             chosen; it was left as it is",
            id.get(..8).unwrap_or(id)
        );
    }
    i32::from(!ids.is_empty())
}

/// `1.234 GiB`, as restic prints sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.3} {}", UNITS[u])
}

/// A size as `ls -l` and `find` print it: bytes, or with `human` (their
/// `--human-readable`) KiB, MiB, GiB as restic prints them.
pub fn size_text(n: u64, human: bool) -> String {
    if human { human_bytes(n) } else { n.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(safe("plain/päth ü"), "plain/päth ü");
        assert_eq!(safe("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(safe("new\nline\ttab\r"), "new\\nline\\ttab\\r");
        assert_eq!(safe("c1\u{9b}31m"), "c1\\u{9b}31m");
        assert_eq!(safe("del\x7f"), "del\\x7f");
    }
}
