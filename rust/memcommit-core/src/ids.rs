//! Generated memory ids.
//!
//! 26 characters of Crockford base32: a 48-bit millisecond time, then 80 bits that start at a
//! random value each new millisecond and count up within it (the ULID scheme, monotonic
//! variant). Ids from one generator therefore sort in the order they were made, even when the
//! clock stands still or steps back.

use std::sync::Mutex;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Makes ids that sort by creation.
pub struct IdGenerator {
    last: Mutex<(u64, u128)>,
}

impl Default for IdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl IdGenerator {
    /// A generator.
    pub const fn new() -> Self {
        IdGenerator { last: Mutex::new((0, 0)) }
    }

    /// `n` new ids for a clock reading of `ms` milliseconds since the epoch.
    pub fn next_ids(&self, ms: u64, n: usize) -> Vec<String> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            if ms > last.0 {
                let mut r = [0u8; 16];
                // Without randomness ids stay unique and ordered; only their spread suffers.
                let _ = getrandom::fill(&mut r);
                // Start in the low half of the 80-bit space so counting up never overflows.
                *last = (ms, u128::from_le_bytes(r) >> 49);
            } else {
                last.1 += 1;
            }
            out.push(encode(last.0, last.1));
        }
        out
    }
}

fn encode(ms: u64, counter: u128) -> String {
    let v: u128 = ((ms as u128 & ((1 << 48) - 1)) << 80) | (counter & ((1u128 << 80) - 1));
    (0..26)
        .map(|i| {
            let shift = 125 - 5 * i;
            let idx = if shift >= 0 { (v >> shift) & 31 } else { (v << -shift) & 31 };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_creation() {
        let g = IdGenerator::new();
        let mut ids = g.next_ids(1_700_000_000_000, 1000);
        ids.extend(g.next_ids(1_600_000_000_000, 10));
        ids.extend(g.next_ids(1_700_000_000_001, 10));
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids.iter().all(|i| i.len() == 26));
    }
}
