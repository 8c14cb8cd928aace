//! Time `Log::verify` on a log file: `cargo run --release --example verify -- PATH`.
//!
//! Prints MB/s for the whole check, and for its parts on one thread (parsing with checksums,
//! record digests, links), to show where the time goes.

use std::time::Instant;

use memcommit_core::format::chain;
use memcommit_core::format::{self, FileHeader, HEADER_LEN};
use memcommit_core::{Log, Options};

fn main() {
    let path = std::env::args().nth(1).expect("usage: verify PATH");
    let bytes = std::fs::read(&path).unwrap();
    let salt = FileHeader::decode(&bytes).unwrap().salt();
    let mb = bytes.len() as f64 / 1e6;

    let t = Instant::now();
    let mut spans = Vec::new();
    let mut off = HEADER_LEN;
    while off < bytes.len() {
        let Ok(r) = format::parse_record(&bytes[off..], salt, format::MAX_PAYLOAD_LEN) else { break };
        spans.push((off, r.bytes.len()));
        off += r.bytes.len();
    }
    let parse = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let digests: Vec<_> = spans.iter().map(|&(o, n)| chain::digest(&bytes[o..o + n])).collect();
    let digest = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut v = chain::start(&bytes[..HEADER_LEN]);
    for d in &digests {
        v = chain::link(&v, d);
    }
    let link = t.elapsed().as_secs_f64();
    let n = spans.len() as f64;
    println!("{} records, {:.0} B/record", spans.len(), bytes.len() as f64 / n);
    println!(
        "one thread: parse+crc {:.0} ns/record, digest {:.0} ns, link {:.0} ns",
        parse * 1e9 / n,
        digest * 1e9 / n,
        link * 1e9 / n
    );

    let log = Log::open(path.as_ref(), Options { read_only: true, ..Options::default() }).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let done = log.verify(None, None).unwrap();
        let s = t.elapsed().as_secs_f64();
        println!("verify: {:.0} MB/s ({:.0} ns/record, {} seals)", mb / s, s * 1e9 / n, done.seals_checked);
    }
}
