//! The SFTP version 3 wire format (draft-ietf-secsh-filexfer-02), as much of
//! it as the SFTP backend speaks: packet type and flag numbers, building a
//! request, and parsing a reply. Everything read from the server is bounded:
//! a packet longer than [`MAX_PACKET`] is refused before it is read, and
//! every string inside a packet must fit in what is left of that packet.

use std::fmt;

/// The protocol version spoken (and the only one accepted).
pub const VERSION: u32 = 3;

/// The largest packet accepted from the server (length field included in
/// neither): room for a 256 KiB data reply plus its header, far more than
/// the 32 KiB reads asked for and than a directory listing batch.
pub const MAX_PACKET: usize = 256 * 1024 + 1024;

/// The largest data block written or asked for in one request.
pub const MAX_CHUNK: usize = 32 * 1024;

// Packet types.
pub const FXP_INIT: u8 = 1;
pub const FXP_VERSION: u8 = 2;
pub const FXP_OPEN: u8 = 3;
pub const FXP_CLOSE: u8 = 4;
pub const FXP_READ: u8 = 5;
pub const FXP_WRITE: u8 = 6;
pub const FXP_LSTAT: u8 = 7;
pub const FXP_FSTAT: u8 = 8;
pub const FXP_OPENDIR: u8 = 11;
pub const FXP_READDIR: u8 = 12;
pub const FXP_REMOVE: u8 = 13;
pub const FXP_MKDIR: u8 = 14;
pub const FXP_STAT: u8 = 17;
pub const FXP_RENAME: u8 = 18;
pub const FXP_STATUS: u8 = 101;
pub const FXP_HANDLE: u8 = 102;
pub const FXP_DATA: u8 = 103;
pub const FXP_NAME: u8 = 104;
pub const FXP_ATTRS: u8 = 105;
pub const FXP_EXTENDED: u8 = 200;
pub const FXP_EXTENDED_REPLY: u8 = 201;

// Open flags.
pub const FXF_READ: u32 = 0x01;
pub const FXF_WRITE: u32 = 0x02;
pub const FXF_CREAT: u32 = 0x08;
pub const FXF_EXCL: u32 = 0x20;

// Attribute flags.
const ATTR_SIZE: u32 = 0x01;
const ATTR_UIDGID: u32 = 0x02;
pub const ATTR_PERMISSIONS: u32 = 0x04;
const ATTR_ACMODTIME: u32 = 0x08;
const ATTR_EXTENDED: u32 = 0x8000_0000;

// Status codes.
pub const FX_EOF: u32 = 1;
pub const FX_NO_SUCH_FILE: u32 = 2;
pub const FX_PERMISSION_DENIED: u32 = 3;
pub const FX_OP_UNSUPPORTED: u32 = 8;

/// The name of a status code, for messages.
pub fn status_name(code: u32) -> &'static str {
    match code {
        0 => "SSH_FX_OK",
        1 => "SSH_FX_EOF",
        2 => "SSH_FX_NO_SUCH_FILE",
        3 => "SSH_FX_PERMISSION_DENIED",
        4 => "SSH_FX_FAILURE",
        5 => "SSH_FX_BAD_MESSAGE",
        6 => "SSH_FX_NO_CONNECTION",
        7 => "SSH_FX_CONNECTION_LOST",
        8 => "SSH_FX_OP_UNSUPPORTED",
        _ => "unknown status",
    }
}

/// File attributes (only those the backend uses are kept).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    pub size: Option<u64>,
    pub permissions: Option<u32>,
    pub mtime: Option<u32>,
}

/// What a file's permission bits say it is (`None`: the server did not say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Other(&'static str),
}

impl Attrs {
    /// The file type from the `S_IFMT` bits of the permissions, if sent.
    pub fn file_type(&self) -> Option<FileType> {
        let p = self.permissions?;
        Some(match p & 0o170000 {
            0o100000 => FileType::Regular,
            0o040000 => FileType::Directory,
            0o120000 => FileType::Symlink,
            0o010000 => FileType::Other("a FIFO"),
            0o020000 => FileType::Other("a character device"),
            0o060000 => FileType::Other("a block device"),
            0o140000 => FileType::Other("a socket"),
            0 => return None,
            _ => FileType::Other("a special file"),
        })
    }
}

/// A request being built: `length | type | id | fields`.
pub struct Request {
    buf: Vec<u8>,
}

impl Request {
    /// A request of type `ty` with request id `id`.
    pub fn new(ty: u8, id: u32) -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; 4]);
        buf.push(ty);
        buf.extend_from_slice(&id.to_be_bytes());
        Request { buf }
    }

    /// The INIT packet (no request id, a version instead).
    pub fn init() -> Self {
        let mut buf = vec![0; 4];
        buf.push(FXP_INIT);
        buf.extend_from_slice(&VERSION.to_be_bytes());
        Request { buf }
    }

    pub fn u32(mut self, v: u32) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(mut self, v: u64) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A string (length-prefixed bytes).
    pub fn bytes(mut self, v: &[u8]) -> Self {
        // Callers never pass more than MAX_CHUNK or a path.
        let len = u32::try_from(v.len()).unwrap_or(u32::MAX);
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(v);
        self
    }

    pub fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }

    /// Attributes carrying only permissions (for OPEN and MKDIR).
    pub fn perms(self, mode: u32) -> Self {
        self.u32(ATTR_PERMISSIONS).u32(mode)
    }

    /// The finished packet, length filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len() - 4).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

/// A malformed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPacket(pub String);

impl fmt::Display for BadPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed SFTP reply: {}", self.0)
    }
}

/// Reads fields from a received packet, never past its end.
pub struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], BadPacket> {
        if n > self.buf.len() {
            return Err(BadPacket(format!(
                "{what} of {n} bytes runs past the end of the packet ({} left)",
                self.buf.len()
            )));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, BadPacket> {
        Ok(self.take(1, "a byte")?[0])
    }

    pub fn u32(&mut self) -> Result<u32, BadPacket> {
        let b = self.take(4, "a uint32")?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, BadPacket> {
        let hi = u64::from(self.u32()?);
        let lo = u64::from(self.u32()?);
        Ok(hi << 32 | lo)
    }

    /// A string, bounded by the packet it is in.
    pub fn bytes(&mut self) -> Result<&'a [u8], BadPacket> {
        let n = self.u32()? as usize;
        self.take(n, "a string")
    }

    pub fn string(&mut self) -> Result<String, BadPacket> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn attrs(&mut self) -> Result<Attrs, BadPacket> {
        let flags = self.u32()?;
        let mut a = Attrs::default();
        if flags & ATTR_SIZE != 0 {
            a.size = Some(self.u64()?);
        }
        if flags & ATTR_UIDGID != 0 {
            self.u32()?;
            self.u32()?;
        }
        if flags & ATTR_PERMISSIONS != 0 {
            a.permissions = Some(self.u32()?);
        }
        if flags & ATTR_ACMODTIME != 0 {
            self.u32()?;
            a.mtime = Some(self.u32()?);
        }
        if flags & ATTR_EXTENDED != 0 {
            let n = self.u32()?;
            for _ in 0..n {
                self.bytes()?;
                self.bytes()?;
            }
        }
        Ok(a)
    }
}

/// A reply to a request.
#[derive(Debug)]
pub enum Reply {
    Status {
        code: u32,
        message: String,
    },
    Handle(Vec<u8>),
    Data(Vec<u8>),
    /// Directory entries: file name and attributes.
    Name(Vec<(String, Attrs)>),
    Attrs(Attrs),
    /// An extended reply (its payload is not used).
    Extended,
}

/// Parses a packet body (type byte first, length already stripped) into its
/// request id and reply.
pub fn parse_reply(body: &[u8]) -> Result<(u32, Reply), BadPacket> {
    let mut c = Cursor::new(body);
    let ty = c.u8()?;
    let id = c.u32()?;
    let reply = match ty {
        FXP_STATUS => {
            let code = c.u32()?;
            // The message and language tag are optional in some servers.
            let message = if c.is_empty() {
                String::new()
            } else {
                c.string()?
            };
            Reply::Status { code, message }
        }
        FXP_HANDLE => {
            let h = c.bytes()?;
            if h.len() > 256 {
                return Err(BadPacket(format!("a handle of {} bytes", h.len())));
            }
            Reply::Handle(h.to_vec())
        }
        FXP_DATA => Reply::Data(c.bytes()?.to_vec()),
        FXP_NAME => {
            let n = c.u32()?;
            // Nothing is allocated by the count: each entry is read from
            // the packet, so a lying count ends at the packet's end.
            let mut v = Vec::new();
            for _ in 0..n {
                let name = c.string()?;
                c.bytes()?; // long name
                v.push((name, c.attrs()?));
            }
            Reply::Name(v)
        }
        FXP_ATTRS => Reply::Attrs(c.attrs()?),
        FXP_EXTENDED_REPLY => Reply::Extended,
        t => return Err(BadPacket(format!("unexpected packet type {t}"))),
    };
    Ok((id, reply))
}

/// Parses a VERSION packet body: the version and the extensions offered.
pub fn parse_version(body: &[u8]) -> Result<(u32, Vec<String>), BadPacket> {
    let mut c = Cursor::new(body);
    let ty = c.u8()?;
    if ty != FXP_VERSION {
        return Err(BadPacket(format!(
            "expected VERSION (2) first, got packet type {ty}"
        )));
    }
    let version = c.u32()?;
    let mut ext = Vec::new();
    while !c.is_empty() {
        ext.push(c.string()?);
        c.bytes()?;
    }
    Ok((version, ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_their_length() {
        let p = Request::new(FXP_OPEN, 7)
            .str("a/b")
            .u32(FXF_READ)
            .u32(0)
            .finish();
        assert_eq!(&p[..4], &((p.len() - 4) as u32).to_be_bytes());
        assert_eq!(p[4], FXP_OPEN);
        assert_eq!(&p[5..9], &7u32.to_be_bytes());
        assert_eq!(&p[9..13], &3u32.to_be_bytes());
        assert_eq!(&p[13..16], b"a/b");
    }

    #[test]
    fn strings_past_the_packet_are_refused() {
        // A DATA reply claiming 4 GiB in a 13-byte packet.
        let mut body = vec![FXP_DATA, 0, 0, 0, 1];
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        body.extend_from_slice(b"abcd");
        let e = parse_reply(&body).unwrap_err();
        assert!(e.0.contains("runs past the end"), "{e}");
    }

    #[test]
    fn names_with_a_lying_count_are_refused() {
        let mut body = vec![FXP_NAME, 0, 0, 0, 1];
        body.extend_from_slice(&1_000_000u32.to_be_bytes());
        assert!(parse_reply(&body).is_err());
    }

    #[test]
    fn attrs_and_types_parse() {
        let mut body = vec![FXP_ATTRS, 0, 0, 0, 9];
        body.extend_from_slice(&(ATTR_SIZE | ATTR_PERMISSIONS | ATTR_ACMODTIME).to_be_bytes());
        body.extend_from_slice(&42u64.to_be_bytes());
        body.extend_from_slice(&0o100644u32.to_be_bytes());
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&1000u32.to_be_bytes());
        let (id, r) = parse_reply(&body).unwrap();
        assert_eq!(id, 9);
        let Reply::Attrs(a) = r else { panic!() };
        assert_eq!(a.size, Some(42));
        assert_eq!(a.mtime, Some(1000));
        assert_eq!(a.file_type(), Some(FileType::Regular));
    }

    #[test]
    fn version_lists_extensions() {
        let mut body = vec![FXP_VERSION, 0, 0, 0, 3];
        for s in ["fsync@openssh.com", "1"] {
            body.extend_from_slice(&(s.len() as u32).to_be_bytes());
            body.extend_from_slice(s.as_bytes());
        }
        let (v, ext) = parse_version(&body).unwrap();
        assert_eq!(v, 3);
        assert_eq!(ext, ["fsync@openssh.com"]);
    }
}
