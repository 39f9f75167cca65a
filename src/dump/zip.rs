//! A directory as a zip stream (written without seeking, so it can go to a
//! pipe): files deflated, directories, symlinks; permission bits (`rwx`,
//! the most zip keeps) and modification times (to the second, in the
//! extended-timestamp field bsdtar and unzip read). Zip has no owners,
//! hard links, devices, FIFOs or extended attributes: hard-linked files are
//! written in full at each path, the others are left out and reported, and
//! names are stored as UTF-8 (a name that is not is written lossily and
//! reported).

use super::{DumpReport, join, write_content};
use crate::error::{Error, Result};
use crate::repository::Repository;
use crate::tree::{Node, NodeKind};
use std::io::Write;
use zip::write::{FullFileOptions, SimpleFileOptions, StreamWriter};
use zip::{CompressionMethod, ZipWriter};

fn zip_err(e: zip::result::ZipError) -> Error {
    Error::io("the output", std::io::Error::other(e))
}

/// Writes directory `node` (at archive path `path`) and everything below.
pub(super) fn write(
    repo: &Repository,
    node: &Node,
    path: &[u8],
    out: &mut dyn Write,
    report: &mut DumpReport,
) -> Result<()> {
    let mut z = ZipWriter::new_stream(out);
    entry(repo, &mut z, path, node, report, 1)?;
    z.finish().map_err(zip_err)?;
    Ok(())
}

/// The options of one entry: its permission bits and times.
fn options(node: &Node) -> Result<FullFileOptions<'static, 'static>> {
    let secs = node.mtime_ns.div_euclid(1_000_000_000);
    let mut o = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .unix_permissions(node.mode & 0o777)
        .large_file(node.size >= 0xffff_ffff);
    if let Some(dt) = dos_time(secs) {
        o = o.last_modified_time(dt);
    }
    let unix = u32::try_from(secs).ok();
    o.with_extended_timestamp(unix, None, None).map_err(zip_err)
}

/// The DOS date and time (UTC) of `secs`, when zip can hold it (1980-2107).
fn dos_time(secs: i64) -> Option<zip::DateTime> {
    let ts = jiff::Timestamp::from_second(secs).ok()?;
    let dt = ts.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    zip::DateTime::from_date_and_time(
        u16::try_from(dt.year()).ok()?,
        dt.month() as u8,
        dt.day() as u8,
        dt.hour() as u8,
        dt.minute() as u8,
        dt.second() as u8,
    )
    .ok()
}

/// Writes one entry; a directory with its contents (`depth`: of a
/// directory's tree, the dumped root's at 1).
fn entry(
    repo: &Repository,
    z: &mut ZipWriter<StreamWriter<&mut dyn Write>>,
    path: &[u8],
    node: &Node,
    report: &mut DumpReport,
    depth: usize,
) -> Result<()> {
    crate::interrupt::check()?;
    let name = String::from_utf8_lossy(path).into_owned();
    if std::str::from_utf8(path).is_err() {
        report
            .skipped
            .push(format!("/{name} (name not UTF-8: written lossily)"));
    }
    match node.kind {
        NodeKind::Dir => {
            if !path.is_empty() {
                z.add_directory(name, options(node)?).map_err(zip_err)?;
            }
            report.dirs += 1;
            let Some(sub) = node.subtree else {
                return Ok(());
            };
            crate::tree::check_depth(depth, format!("tree {sub}"))?;
            let tree = repo.load_tree(&sub)?;
            for n in &tree.nodes {
                entry(repo, z, &join(path, &n.name), n, report, depth + 1)?;
            }
        }
        NodeKind::File => {
            z.start_file(name, options(node)?).map_err(zip_err)?;
            report.bytes += write_content(repo, node, z)?;
            report.files += 1;
        }
        NodeKind::Symlink => {
            let target = String::from_utf8_lossy(&node.link_target).into_owned();
            z.add_symlink(name, target, options(node)?)
                .map_err(zip_err)?;
            report.links += 1;
        }
        k => report.skipped.push(format!("/{name} ({})", k.word())),
    }
    Ok(())
}
