//! The seal record's payload: the hash chain's value written into the log itself.
//!
//! A seal is a record (op `Seal`, empty key) whose payload says "the chain over every record up
//! to and including LSN `lsn` is `chain`":
//!
//! ```text
//! version u8 (1) · flags u8 (bit 0: keyed) · lsn u64 · chain [32] · mac [32]
//! ```
//!
//! `lsn` is the last LSN of one of the `SEAL_WINDOW` commits before the seal record (a seal
//! written by hand covers the commit just before it; an automatic seal covers the newest commit
//! the chain thread has already hashed, so the writer does not wait for hashing). A keyed seal also carries
//! `mac = blake3_keyed(key, chain || lsn as u64 LE)`, where `key = blake3::derive_key(KEY_CONTEXT,
//! secret)`: without the secret nobody can make one that checks, or check one. An unkeyed
//! seal's mac is zeros.

use crate::format::chain::ChainValue;
use crate::format::RecordView;

/// The payload version this build writes and reads.
pub const SEAL_VERSION: u8 = 1;
/// Bytes in a seal's payload.
pub const SEAL_PAYLOAD_LEN: usize = 2 + 8 + 32 + 32;
/// blake3 `derive_key` context that turns a secret into a seal key.
pub const KEY_CONTEXT: &str = "memcommit 2026-11-30 seal key v1";
const FLAG_KEYED: u8 = 1;
/// A seal covers the end of one of this many commits before it.
pub const SEAL_WINDOW: usize = 64;

/// A 32-byte seal key (derived from the user's secret with [`derive_key`]).
pub type SealKey = [u8; 32];

/// Turn a secret of any length into a seal key.
pub fn derive_key(secret: &[u8]) -> SealKey {
    blake3::derive_key(KEY_CONTEXT, secret)
}

/// The keyed hash of a chain value at an LSN.
pub fn mac(key: &SealKey, chain: &ChainValue, lsn: u64) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(chain);
    h.update(&lsn.to_le_bytes());
    *h.finalize().as_bytes()
}

/// A seal as the log holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealEntry {
    /// The last LSN the seal covers.
    pub lsn: u64,
    /// LSN of the seal record itself.
    pub record_lsn: u64,
    /// Byte offset of the seal record.
    pub offset: u64,
    /// When it was written (µs since the epoch).
    pub at: i64,
    /// Whether it carries a keyed hash.
    pub keyed: bool,
    /// The chain value over every record up to `lsn`.
    pub chain: ChainValue,
    /// The keyed hash of `chain` (zeros when not keyed).
    pub mac: [u8; 32],
}

impl SealEntry {
    /// The seal's hash as users see it: the keyed hash for a keyed seal, else the chain value.
    pub fn hash(&self) -> &[u8; 32] {
        if self.keyed {
            &self.mac
        } else {
            &self.chain
        }
    }
}

/// Write a seal's payload.
pub fn encode_payload(out: &mut Vec<u8>, lsn: u64, chain: &ChainValue, key: Option<&SealKey>) {
    out.push(SEAL_VERSION);
    out.push(if key.is_some() { FLAG_KEYED } else { 0 });
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(chain);
    match key {
        Some(k) => out.extend_from_slice(&mac(k, chain, lsn)),
        None => out.extend_from_slice(&[0; 32]),
    }
}

/// Read a seal record (`None` when its payload is malformed).
pub fn decode(rec: &RecordView<'_>, offset: u64) -> Option<SealEntry> {
    let p = rec.payload;
    if p.len() != SEAL_PAYLOAD_LEN || p[0] != SEAL_VERSION || p[1] & !FLAG_KEYED != 0 || !rec.key.is_empty() {
        return None;
    }
    let lsn = u64::from_le_bytes(p[2..10].try_into().ok()?);
    if lsn >= rec.lsn {
        return None;
    }
    Some(SealEntry {
        lsn,
        record_lsn: rec.lsn,
        offset,
        at: rec.at,
        keyed: p[1] & FLAG_KEYED != 0,
        chain: p[10..42].try_into().ok()?,
        mac: p[42..74].try_into().ok()?,
    })
}
