//! A directory as a POSIX pax tar stream. Each entry is a ustar header,
//! preceded by a pax extended header when the ustar fields cannot hold
//! what the entry has: a path or link target over 100 bytes (`path`,
//! `linkpath`, with `hdrcharset=BINARY` when not UTF-8), nanosecond or
//! negative times (`mtime`), large ids or long owner names, sizes past
//! 8 GiB, and extended attributes (`SCHILY.xattr.NAME`, as GNU tar and
//! bsdtar write and read them). Short non-UTF-8 names are stored as their
//! raw bytes. The second and later paths of a hard-linked file are link
//! entries naming the first.

use super::{DumpReport, join, write_content};
use crate::error::{Error, Result};
use crate::repository::Repository;
use crate::tree::{Node, NodeKind};
use std::collections::HashMap;
use std::io::Write;
use tar::{Builder, EntryType, Header};

/// The largest value a ustar octal field of `digits` digits holds.
const fn octal_max(digits: u32) -> u64 {
    (1u64 << (3 * digits)) - 1
}

fn out_err(e: std::io::Error) -> Error {
    Error::io("the output", e)
}

/// One dump's tar writer.
struct TarDump<'r, 'w> {
    repo: &'r Repository,
    b: Builder<&'w mut dyn Write>,
    /// (device, inode) of multiply linked files → first path written.
    links: HashMap<(u64, u64), Vec<u8>>,
    report: &'r mut DumpReport,
}

/// Writes directory `node` (at archive path `path`) and everything below.
pub(super) fn write(
    repo: &Repository,
    node: &Node,
    path: &[u8],
    out: &mut dyn Write,
    report: &mut DumpReport,
) -> Result<()> {
    let mut t = TarDump {
        repo,
        b: Builder::new(out),
        links: HashMap::new(),
        report,
    };
    t.entry(path, node, 1)?;
    t.b.finish().map_err(out_err)
}

impl TarDump<'_, '_> {
    /// Writes one entry; a directory with its contents.
    /// (`depth`: of a directory's tree, the dumped root's at 1.)
    fn entry(&mut self, path: &[u8], node: &Node, depth: usize) -> Result<()> {
        crate::interrupt::check()?;
        match node.kind {
            NodeKind::Dir => {
                if !path.is_empty() {
                    let mut p = path.to_vec();
                    p.push(b'/');
                    self.header(&p, node, EntryType::Directory, 0, b"")?;
                }
                self.report.dirs += 1;
                let Some(sub) = node.subtree else {
                    return Ok(());
                };
                crate::tree::check_depth(depth, format!("tree {sub}"))?;
                let tree = self.repo.load_tree(&sub)?;
                for n in &tree.nodes {
                    self.entry(&join(path, &n.name), n, depth + 1)?;
                }
                Ok(())
            }
            NodeKind::File => self.file(path, node),
            NodeKind::Symlink => {
                self.report.links += 1;
                self.header(path, node, EntryType::Symlink, 0, &node.link_target)
            }
            NodeKind::Fifo => self.header(path, node, EntryType::Fifo, 0, b""),
            NodeKind::CharDev => self.header(path, node, EntryType::Char, 0, b""),
            NodeKind::BlockDev => self.header(path, node, EntryType::Block, 0, b""),
            NodeKind::Socket => {
                self.report
                    .skipped
                    .push(format!("/{} (socket)", String::from_utf8_lossy(path)));
                Ok(())
            }
        }
    }

    /// A regular file: a link entry if an earlier path has its inode,
    /// else its header and verified content, padded to a block.
    fn file(&mut self, path: &[u8], node: &Node) -> Result<()> {
        if node.links > 1 {
            let key = (node.device, node.inode);
            if let Some(first) = self.links.get(&key).cloned() {
                self.report.links += 1;
                return self.header(path, node, EntryType::Link, 0, &first);
            }
            self.links.insert(key, path.to_vec());
        }
        self.header(path, node, EntryType::Regular, node.size, b"")?;
        let out = self.b.get_mut();
        let written = write_content(self.repo, node, out)?;
        let pad = (512 - (written % 512)) % 512;
        out.write_all(&vec![0u8; pad as usize]).map_err(out_err)?;
        self.report.files += 1;
        self.report.bytes += written;
        Ok(())
    }

    /// Writes the (pax and) ustar header of one entry.
    fn header(
        &mut self,
        path: &[u8],
        node: &Node,
        ty: EntryType,
        size: u64,
        link: &[u8],
    ) -> Result<()> {
        let mut h = Header::new_ustar();
        let mut pax: Vec<(String, Vec<u8>)> = Vec::new();
        let mut binary = false;
        h.set_entry_type(ty);
        h.set_mode(node.mode & 0o7777);
        set_numbers(&mut h, node, size, &mut pax);
        set_owners(&mut h, node, &mut pax)?;
        if matches!(ty, EntryType::Char | EntryType::Block) {
            let (major, minor) = (
                nix::sys::stat::major(node.rdev),
                nix::sys::stat::minor(node.rdev),
            );
            h.set_device_major(major as u32).map_err(out_err)?;
            h.set_device_minor(minor as u32).map_err(out_err)?;
        }
        let u = h
            .as_ustar_mut()
            .ok_or_else(|| Error::Usage("not a ustar header".into()))?;
        put_name(&mut u.name, path, "path", &mut pax, &mut binary);
        if !link.is_empty() {
            put_name(&mut u.linkname, link, "linkpath", &mut pax, &mut binary);
        }
        for x in &node.xattrs {
            let name = String::from_utf8_lossy(&x.name);
            pax.push((format!("SCHILY.xattr.{name}"), x.value.clone()));
        }
        if binary {
            pax.insert(0, ("hdrcharset".into(), b"BINARY".to_vec()));
        }
        if !pax.is_empty() {
            self.b
                .append_pax_extensions(pax.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                .map_err(out_err)?;
        }
        h.set_cksum();
        self.b.get_mut().write_all(h.as_bytes()).map_err(out_err)
    }
}

/// Puts `name` into a ustar name field when it fits, else its first bytes
/// there and the whole name in pax record `key`.
fn put_name(
    field: &mut [u8],
    name: &[u8],
    key: &str,
    pax: &mut Vec<(String, Vec<u8>)>,
    binary: &mut bool,
) {
    let n = name.len().min(field.len());
    field[..n].copy_from_slice(&name[..n]);
    if name.len() > field.len() {
        *binary |= std::str::from_utf8(name).is_err();
        pax.push((key.into(), name.to_vec()));
    }
}

/// Size, ids and mtime: in the ustar fields, and in pax records where the
/// fields cannot hold them (nanoseconds, negative or far times, big ids).
fn set_numbers(h: &mut Header, node: &Node, size: u64, pax: &mut Vec<(String, Vec<u8>)>) {
    h.set_size(size);
    if size > octal_max(11) {
        pax.push(("size".into(), size.to_string().into_bytes()));
    }
    for (key, id, set) in [
        ("uid", node.uid, Header::set_uid as fn(&mut Header, u64)),
        ("gid", node.gid, Header::set_gid),
    ] {
        if u64::from(id) > octal_max(7) {
            set(h, 0);
            pax.push((key.into(), id.to_string().into_bytes()));
        } else {
            set(h, u64::from(id));
        }
    }
    let ns = node.mtime_ns;
    let (secs, frac) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    h.set_mtime(secs.clamp(0, octal_max(11) as i64) as u64);
    if frac != 0 || secs < 0 || secs as u64 > octal_max(11) {
        pax.push(("mtime".into(), pax_time(ns).into_bytes()));
    }
}

/// A time in nanoseconds as a pax decimal (`-1.500000000`).
fn pax_time(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
}

/// Owner names: in the ustar fields when they fit (31 bytes), else in pax.
fn set_owners(h: &mut Header, node: &Node, pax: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for (key, name, is_user) in [("uname", &node.user, true), ("gname", &node.group, false)] {
        if name.is_empty() {
            continue;
        }
        if name.len() < 32 {
            let r = if is_user {
                h.set_username(name)
            } else {
                h.set_groupname(name)
            };
            r.map_err(out_err)?;
        } else {
            pax.push((key.into(), name.as_bytes().to_vec()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_times() {
        assert_eq!(pax_time(1_500_000_000_999_999_999), "1500000000.999999999");
        assert_eq!(pax_time(-1_500_000_000), "-1.500000000");
        assert_eq!(pax_time(-500_000_000), "-0.500000000");
        assert_eq!(octal_max(7), 0o7777777);
    }
}
