//! The `larder` binary: parse arguments, call the library, print, and map
//! errors to restic's exit codes.

fn main() {
    let code = larder::cli::main();
    std::process::exit(code);
}
