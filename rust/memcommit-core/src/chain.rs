//! The blake3 hash chain over a log's records.
//!
//! ```text
//! chain_0 = blake3(the 64-byte file header)          (store id and generation seed it)
//! chain_i = blake3(chain_{i-1} || blake3(record_i) || lsn_i as u64 little-endian)
//! ```
//!
//! `record_i` is the record's exact bytes, framing and checksum included, in log order. Each
//! record is hashed on its own and only the 32-byte digests are chained, so a verifier can hash
//! records in parallel and then walk the chain over the digests, checking every link in order
//! (the recipe of the storage-reliability notes, section 3.5). The writer extends the chain on
//! every append, so a seal is a copy of a value already at hand.

/// A chain value.
pub type ChainValue = [u8; 32];

/// The chain value before the first record of a log with this header.
pub fn start(header: &[u8]) -> ChainValue {
    *blake3::hash(header).as_bytes()
}

/// The digest of one record's bytes.
pub fn digest(record: &[u8]) -> ChainValue {
    *blake3::hash(record).as_bytes()
}

/// Extend the chain by one record, given its digest and LSN.
pub fn link(prev: &ChainValue, digest: &ChainValue, lsn: u64) -> ChainValue {
    let mut h = blake3::Hasher::new();
    h.update(prev);
    h.update(digest);
    h.update(&lsn.to_le_bytes());
    *h.finalize().as_bytes()
}

/// Extend the chain by one record (its bytes; the LSN is read from them).
pub fn step(prev: &ChainValue, record: &[u8]) -> ChainValue {
    let lsn = u64::from_le_bytes(record[8..16].try_into().expect("a record holds its LSN at bytes 8..16"));
    link(prev, &digest(record), lsn)
}
