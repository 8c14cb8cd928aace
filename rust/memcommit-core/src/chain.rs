//! The blake3 hash chain over a log's records.
//!
//! `chain_0 = blake3(file header)` and `chain_i = blake3(chain_{i-1} || bytes of record i)`:
//! every record's exact bytes, framing included, in log order. The writer extends the chain on
//! every append, so a seal is a copy of a value already at hand.

/// A chain value.
pub type ChainValue = [u8; 32];

/// The chain value before the first record of a log with this header.
pub fn start(header: &[u8]) -> ChainValue {
    *blake3::hash(header).as_bytes()
}

/// Extend the chain by one record.
pub fn step(prev: &ChainValue, record: &[u8]) -> ChainValue {
    let mut h = blake3::Hasher::new();
    h.update(prev);
    h.update(record);
    *h.finalize().as_bytes()
}
