//! What an SFTP server sends, after the client has read a packet's length
//! and refused one over `MAX_PACKET`: `proto::parse_reply` and
//! `proto::parse_version` on the packet's body. Neither may panic; what they
//! accept must fit in the packet (a handle of at most 256 bytes, data and
//! names no longer than the bytes that carried them).
#![no_main]

use larder::backend::sftp::proto::{self, Reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(proto::MAX_PACKET)];
    match proto::parse_reply(data) {
        Ok((id, reply)) => {
            assert!(data.len() >= 5, "a reply accepted from {} bytes", data.len());
            assert_eq!(id, u32::from_be_bytes([data[1], data[2], data[3], data[4]]));
            let room = data.len() - 5;
            match reply {
                Reply::Handle(h) => assert!(h.len() <= 256 && h.len() + 4 <= room),
                Reply::Data(d) => assert!(d.len() + 4 <= room),
                // Each entry is at least three length or flag fields.
                Reply::Name(v) => assert!(room >= 4 && v.len() <= (room - 4) / 12),
                Reply::Status { .. } | Reply::Attrs(_) => assert!(room >= 4),
                Reply::Extended => {}
            }
        }
        Err(e) => assert!(!e.0.is_empty(), "an error without a message"),
    }
    match proto::parse_version(data) {
        Ok((_, ext)) => {
            assert_eq!(data[0], proto::FXP_VERSION);
            assert!(ext.len() <= (data.len() - 5) / 8);
        }
        Err(e) => assert!(!e.0.is_empty(), "an error without a message"),
    }
});
