//! The `larder` binary: parse arguments, call the library, print, and map
//! errors to restic's exit codes.

fn main() {
    fix_mmap_threshold();
    std::process::exit(on_a_large_stack(larder::cli::main));
}

/// Stack for the command's thread. The walks of a snapshot's trees recurse
/// a level at a time, up to `tree::MAX_DEPTH` (2,048) levels, and the
/// deepest of them (`repair snapshots`) takes up to about 4 KiB a level:
/// about the whole of the 8 MiB main thread's stack. 64 MiB leaves eight
/// times that; only the pages a walk touches are ever allocated.
const STACK: usize = 64 << 20;

/// Runs `f` on a thread with a [`STACK`]-byte stack (on this thread if no
/// such thread can be made); its exit code, 101 if it panicked.
fn on_a_large_stack(f: fn() -> i32) -> i32 {
    match std::thread::Builder::new()
        .name("larder".into())
        .stack_size(STACK)
        .spawn(f)
    {
        Ok(handle) => handle.join().unwrap_or(101),
        Err(_) => f(),
    }
}

/// Buffers of 512 KiB and more (the larger chunks, the nodes of
/// large directories, packs being filled, pack reads) are mapped and
/// unmapped one by one rather than carved from malloc's arenas.
///
/// glibc raises its mmap threshold to the size of the largest mapped
/// block freed so far (up to 32 MiB), and after that every buffer below it
/// comes from per-thread arenas that keep what is freed: a backup's peak
/// RSS then grew with the number of reading and packing threads. Fixing
/// the threshold turns that adjustment off. At 2 MiB (issue 15, first
/// round) a cold backup of the benchmark tree peaked at 50-53 MiB against
/// 56-61 MiB. At 512 KiB the buffers of 0.5 to 2 MiB that one thread
/// allocates and another frees (old trees loaded by the listing pool and
/// dropped by the walk, blob batches, large chunks) no longer fragment
/// the arenas: an incremental backup of the benchmark tree peaked at
/// 34.4-35.5 MiB against 40.8-45.0 MiB, a cold one at 38.1-40.7 against
/// 40.3-45.3 MiB (a key of low work factor, so the backup's own work), at
/// the same wall time (bench/results/2026-12-05-mmap). A threshold the user
/// set (`MALLOC_MMAP_THRESHOLD_` or `GLIBC_TUNABLES`) is left as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_mmap_threshold() {
    const THRESHOLD: libc::c_int = 512 << 10;
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("GLIBC_TUNABLES").is_some()
    {
        return;
    }
    // SAFETY: mallopt only sets one of glibc's allocator parameters; it
    // takes no pointers and runs first in main, before any other thread
    // exists. glibc offers no safe interface for it. A refusal (0) leaves
    // the defaults, which are correct, only larger.
    let _accepted = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_mmap_threshold() {}
