//! The blake3 hash chain over a log's records.
//!
//! ```text
//! chain_0 = blake3(the 64-byte file header)          (store id and generation seed it)
//! chain_i = blake3(chain_{i-1} || blake3(record_i))   (one 64-byte block)
//! ```
//!
//! `record_i` is the record's exact bytes, framing and checksum included (so its LSN, time and
//! salt too), in log order. A link is a single 64-byte blake3 block: the links are the one part
//! of verification that cannot run in parallel, so they are kept to one compression each. Each
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

/// Extend the chain by one record, given its digest.
pub fn link(prev: &ChainValue, digest: &ChainValue) -> ChainValue {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(prev);
    block[32..].copy_from_slice(digest);
    *blake3::hash(&block).as_bytes()
}

/// Extend the chain by one record (its bytes).
pub fn step(prev: &ChainValue, record: &[u8]) -> ChainValue {
    link(prev, &digest(record))
}
