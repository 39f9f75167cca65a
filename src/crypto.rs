//! Keys and cryptography for repository contents: the master key, the keys
//! derived from it, per-object authenticated encryption (XChaCha20-Poly1305),
//! keyed blob IDs and the key-derived FastCDC gear table.
//!
//! The master key never touches storage in the clear: `keys.rs` wraps it with
//! age. Everything here is pure computation.

use crate::error::{Error, Result};
use crate::id::Id;
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};

/// Bytes of the random nonce in front of every sealed object.
pub const NONCE_LEN: usize = 24;
/// Bytes of the Poly1305 tag behind every sealed object.
pub const TAG_LEN: usize = 16;
/// Total per-object overhead of [`Keys::seal`].
pub const SEAL_OVERHEAD: usize = NONCE_LEN + TAG_LEN;

const CTX_ENCRYPT: &str = "larder 2026-11 v1 object encryption key";
const CTX_BLOB_ID: &str = "larder 2026-11 v1 blob id key";
const CTX_GEAR: &str = "larder 2026-11 v1 fastcdc gear table";

/// Fills `buf` from the operating system's CSPRNG.
pub fn fill_random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf)
        .map_err(|e| Error::internal(format!("the system random number generator failed: {e}")))
}

/// Nonces drawn from one call to the system's generator at a time (170 of
/// them). A backup seals one object per chunk: asking the kernel for each
/// 24-byte nonce was one `getrandom` call per chunk (57 k in a cold backup
/// of the benchmark tree).
const NONCE_POOL: usize = 170 * NONCE_LEN;

/// This thread's unused nonce bytes: `bytes[used..]`, straight from the
/// system's generator; each nonce is handed out once and its bytes cleared.
struct NoncePool {
    bytes: [u8; NONCE_POOL],
    used: usize,
}

thread_local! {
    static NONCES: std::cell::RefCell<NoncePool> = const {
        std::cell::RefCell::new(NoncePool { bytes: [0; NONCE_POOL], used: NONCE_POOL })
    };
}

/// A fresh random nonce for one sealed object.
fn fresh_nonce() -> Result<[u8; NONCE_LEN]> {
    NONCES.with_borrow_mut(|p| {
        if p.used + NONCE_LEN > NONCE_POOL {
            fill_random(&mut p.bytes)?;
            p.used = 0;
        }
        let taken = &mut p.bytes[p.used..p.used + NONCE_LEN];
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(taken);
        taken.fill(0);
        p.used += NONCE_LEN;
        Ok(nonce)
    })
}

/// A fresh random ID (repository ids).
pub fn random_id() -> Result<Id> {
    let mut b = [0u8; 32];
    fill_random(&mut b)?;
    Ok(Id(b))
}

/// The 32-byte repository master key.
#[derive(Clone)]
pub struct MasterKey(pub(crate) [u8; 32]);

impl MasterKey {
    /// A fresh random master key for a new repository.
    pub fn generate() -> Result<Self> {
        let mut k = [0u8; 32];
        fill_random(&mut k)?;
        Ok(MasterKey(k))
    }

    /// Wraps raw key bytes (from a decrypted key file).
    pub fn from_bytes(b: [u8; 32]) -> Self {
        MasterKey(b)
    }

    /// The raw bytes (only for wrapping into a key file).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl Drop for MasterKey {
    fn drop(&mut self) {
        self.0 = [0u8; 32];
    }
}

/// All keys derived from the master key.
pub struct Keys {
    aead: XChaCha20Poly1305,
    id_key: [u8; 32],
    gear: Box<[u64; 256]>,
}

impl Keys {
    /// Derives every subkey from `master` with BLAKE3 `derive_key`.
    pub fn derive(master: &MasterKey) -> Keys {
        let enc = blake3::derive_key(CTX_ENCRYPT, &master.0);
        let id_key = blake3::derive_key(CTX_BLOB_ID, &master.0);
        let mut xof = blake3::Hasher::new_derive_key(CTX_GEAR)
            .update(&master.0)
            .finalize_xof();
        let mut raw = [0u8; 256 * 8];
        xof.fill(&mut raw);
        let mut gear = Box::new([0u64; 256]);
        for (i, g) in gear.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[i * 8..i * 8 + 8]);
            *g = u64::from_le_bytes(b);
        }
        Keys {
            aead: XChaCha20Poly1305::new(&enc.into()),
            id_key,
            gear,
        }
    }

    /// The blob ID of `plaintext`: keyed BLAKE3.
    pub fn blob_id(&self, plaintext: &[u8]) -> Id {
        Id(*blake3::keyed_hash(&self.id_key, plaintext).as_bytes())
    }

    /// The key-derived 256-entry gear table for FastCDC.
    pub fn gear(&self) -> &[u64; 256] {
        &self.gear
    }

    /// Encrypts `plain` with a random nonce, binding `ad` (associated data):
    /// returns `nonce || ciphertext || tag`.
    pub fn seal(&self, ad: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(plain.len() + SEAL_OVERHEAD);
        self.seal_into(ad, plain, &mut out)?;
        Ok(out)
    }

    /// Like [`Keys::seal`] but appends to `out`.
    pub fn seal_into(&self, ad: &[u8], plain: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let nonce = fresh_nonce()?;
        out.extend_from_slice(&nonce);
        let start = out.len();
        out.extend_from_slice(plain);
        let tag = self
            .aead
            .encrypt_inout_detached(&XNonce::from(nonce), ad, (&mut out[start..]).into())
            .map_err(|_| Error::internal("encryption failed (input too long)"))?;
        out.extend_from_slice(tag.as_slice());
        Ok(())
    }

    /// Authenticates and decrypts `sealed` (as made by [`Keys::seal`]) in place,
    /// returning the plaintext. `what` names the object for errors.
    pub fn open(&self, what: &str, ad: &[u8], sealed: &[u8]) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.open_into(what, ad, sealed, &mut buf)?;
        Ok(buf)
    }

    /// [`Keys::open`] of a buffer it owns, decrypted where it lies: `buf` is
    /// `ad || nonce || ciphertext || tag` (the associated data is its first
    /// `ad_len` bytes), and the plaintext is returned in the same
    /// allocation, so a large object is held once, not twice.
    pub fn open_in_place<W: std::fmt::Display + ?Sized>(
        &self,
        what: &W,
        ad_len: usize,
        mut buf: Vec<u8>,
    ) -> Result<Vec<u8>> {
        check_sealed_len(what, buf.len().saturating_sub(ad_len))?;
        let end = buf.len() - TAG_LEN;
        let (head, rest) = buf.split_at_mut(ad_len + NONCE_LEN);
        let (ct, tag) = rest.split_at_mut(end - ad_len - NONCE_LEN);
        let (ad, nonce) = head.split_at(ad_len);
        // Both splits are exact: the length was checked above.
        let (Ok(nonce), Ok(tag)) = (XNonce::try_from(nonce), Tag::try_from(&*tag)) else {
            return Err(Error::internal("nonce or tag of the wrong length"));
        };
        self.aead
            .decrypt_inout_detached(&nonce, ad, ct.into(), &tag)
            .map_err(|_| {
                Error::corrupt(
                    what,
                    "authentication failed (modified, truncated or swapped)",
                )
            })?;
        buf.truncate(end);
        buf.drain(..ad_len + NONCE_LEN);
        Ok(buf)
    }

    /// [`Keys::open`] into `buf` (its contents replaced; a buffer reused
    /// across calls saves an allocation and its page faults each time). On
    /// failure `buf` holds nothing of the plaintext.
    pub fn open_into<W: std::fmt::Display + ?Sized>(
        &self,
        what: &W,
        ad: &[u8],
        sealed: &[u8],
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        buf.clear();
        check_sealed_len(what, sealed.len())?;
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let (ct, tag) = rest.split_at(rest.len() - TAG_LEN);
        // Both splits are exact: the length was checked above.
        let (Ok(nonce), Ok(tag)) = (XNonce::try_from(nonce), Tag::try_from(tag)) else {
            return Err(Error::internal("nonce or tag of the wrong length"));
        };
        buf.extend_from_slice(ct);
        self.aead
            .decrypt_inout_detached(&nonce, ad, buf.as_mut_slice().into(), &tag)
            .map_err(|_| {
                buf.clear();
                Error::corrupt(
                    what,
                    "authentication failed (modified, truncated or swapped)",
                )
            })
    }
}

/// A sealed object (nonce, ciphertext, tag) of `len` bytes is at least
/// its nonce and tag.
fn check_sealed_len<W: std::fmt::Display + ?Sized>(what: &W, len: usize) -> Result<()> {
    if len < SEAL_OVERHEAD {
        return Err(Error::corrupt(
            what,
            format!("{len} bytes is shorter than the {SEAL_OVERHEAD}-byte nonce and tag"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sealing runs ChaCha20's widest code the CPU offers (AVX-512 where it
    /// has it, by the build's `chacha20_avx512` cfg): objects of every
    /// length around its block groups (64 bytes, 4 and 16 blocks) and
    /// beyond open with the AEAD crate's previous release, built without
    /// that code, and what it seals opens here.
    #[test]
    fn sealing_agrees_with_another_implementation() {
        use chacha20poly1305_v010::aead::{Aead, KeyInit, Payload};
        let master = MasterKey::from_bytes([9; 32]);
        let k = Keys::derive(&master);
        let other = chacha20poly1305_v010::XChaCha20Poly1305::new(
            &blake3::derive_key(CTX_ENCRYPT, &master.0).into(),
        );
        let mut lens: Vec<usize> = (0..=1100).collect();
        lens.extend([4095, 4096, 4097, 65_537, 1 << 20]);
        for len in lens {
            let plain: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let sealed = k.seal(b"ad", &plain).unwrap();
            let (nonce, ct) = sealed.split_at(NONCE_LEN);
            let opened = other
                .decrypt(
                    nonce.into(),
                    Payload {
                        msg: ct,
                        aad: b"ad",
                    },
                )
                .unwrap_or_else(|_| panic!("{len} bytes sealed here do not open there"));
            assert_eq!(opened, plain, "{len} bytes");
            let theirs = other
                .encrypt(
                    nonce.into(),
                    Payload {
                        msg: &plain,
                        aad: b"ad",
                    },
                )
                .unwrap();
            assert_eq!(theirs, ct, "{len} bytes: the ciphertexts differ");
            let theirs_sealed = [nonce, &theirs[..]].concat();
            assert_eq!(k.open("x", b"ad", &theirs_sealed).unwrap(), plain);
        }
    }

    /// Nonces come from a pool refilled 170 at a time: across several
    /// refills, on two threads, every sealed object has a nonce of its own.
    #[test]
    fn every_seal_takes_a_nonce_of_its_own() {
        let k = Keys::derive(&MasterKey::from_bytes([7; 32]));
        let per_thread = 3 * NONCE_POOL / NONCE_LEN + 5;
        let nonces = |k: &Keys| -> Vec<[u8; NONCE_LEN]> {
            (0..per_thread)
                .map(|_| {
                    let s = k.seal(b"ad", b"x").unwrap();
                    assert_eq!(k.open("x", b"ad", &s).unwrap(), b"x");
                    s[..NONCE_LEN].try_into().unwrap()
                })
                .collect()
        };
        let mut all = std::thread::scope(|sc| {
            let other = sc.spawn(|| nonces(&k));
            let mut mine = nonces(&k);
            mine.extend(other.join().unwrap());
            mine
        });
        assert!(all.iter().all(|n| n != &[0u8; NONCE_LEN]));
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2 * per_thread);
    }

    #[test]
    fn seal_open_round_trip_and_binding() {
        let k = Keys::derive(&MasterKey::from_bytes([7; 32]));
        let s = k.seal(b"ad", b"hello").unwrap();
        assert_eq!(s.len(), 5 + SEAL_OVERHEAD);
        assert_eq!(k.open("x", b"ad", &s).unwrap(), b"hello");
        assert!(k.open("x", b"other", &s).is_err());
        let mut t = s.clone();
        t[30] ^= 1;
        assert!(k.open("x", b"ad", &t).is_err());
        assert!(k.open("x", b"ad", &s[..10]).is_err());
    }

    #[test]
    fn open_into_replaces_the_buffer_and_leaves_nothing_on_failure() {
        let k = Keys::derive(&MasterKey::from_bytes([7; 32]));
        let long = k.seal(b"ad", &[9u8; 300]).unwrap();
        let short = k.seal(b"ad", b"hi").unwrap();
        let mut buf = Vec::new();
        k.open_into("x", b"ad", &long, &mut buf).unwrap();
        assert_eq!(buf, [9u8; 300]);
        k.open_into("x", b"ad", &short, &mut buf).unwrap();
        assert_eq!(buf, b"hi");
        // A failed authentication does not leave the ciphertext (or the
        // last plaintext) behind for a caller that ignores the error.
        assert!(k.open_into("x", b"other", &long, &mut buf).is_err());
        assert!(buf.is_empty());
    }

    #[test]
    fn open_in_place_agrees_with_open() {
        let k = Keys::derive(&MasterKey::from_bytes([7; 32]));
        for plain in [&b""[..], b"hi", &[9u8; 3000]] {
            let mut buf = b"header".to_vec();
            k.seal_into(b"header", plain, &mut buf).unwrap();
            let want = k.open("x", b"header", &buf[6..]).unwrap();
            assert_eq!(k.open_in_place("x", 6, buf.clone()).unwrap(), want);
            assert_eq!(want, plain);
            // The associated data is the buffer's first bytes: another
            // split, a flipped bit anywhere, or a cut tag fails.
            assert!(k.open_in_place("x", 5, buf.clone()).is_err());
            for at in [0, 6, 6 + NONCE_LEN, buf.len() - 1] {
                let mut bad = buf.clone();
                bad[at] ^= 1;
                assert!(k.open_in_place("x", 6, bad).is_err(), "bit {at}");
            }
            let short = buf[..buf.len() - 1].to_vec();
            assert!(k.open_in_place("x", 6, short).is_err());
        }
        let e = k.open_in_place("obj/x", 6, vec![0; 6 + SEAL_OVERHEAD - 1]);
        assert!(e.unwrap_err().to_string().contains("obj/x"));
        assert!(k.open_in_place("x", 10, vec![0; 4]).is_err());
    }

    #[test]
    fn derived_keys_depend_on_master() {
        let a = Keys::derive(&MasterKey::from_bytes([1; 32]));
        let b = Keys::derive(&MasterKey::from_bytes([2; 32]));
        assert_ne!(a.blob_id(b"x"), b.blob_id(b"x"));
        assert_ne!(a.gear()[..], b.gear()[..]);
        assert_ne!(a.blob_id(b"x"), Id(*blake3::hash(b"x").as_bytes()));
    }
}
