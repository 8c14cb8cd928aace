//! Time `Log::verify` on a log file: `cargo run --release --example verify -- PATH`.
//!
//! Prints, on one thread, what the chain costs a record under each rule on the same bytes (what
//! the writer's chain thread spends): linking every record (format versions 1 and 2: a digest
//! and a link per record) and linking every commit (version 3: framing, and blake3 over each
//! commit's bytes). Then MB/s for the whole `verify`, three times.

use std::time::Instant;

use memcommit_core::format::chain::{self, Linker};
use memcommit_core::format::{self, FileHeader, HEADER_LEN};
use memcommit_core::{Log, Options};

fn main() {
    let path = std::env::args().nth(1).expect("usage: verify PATH");
    let bytes = std::fs::read(&path).unwrap();
    let header = FileHeader::decode(&bytes).unwrap();
    let salt = header.salt();
    let mb = bytes.len() as f64 / 1e6;

    let t = Instant::now();
    let mut spans = Vec::new();
    let mut commits = 0usize;
    let mut off = HEADER_LEN;
    while off < bytes.len() {
        let Ok(r) = format::parse_record(&bytes[off..], salt, format::MAX_PAYLOAD_LEN) else { break };
        spans.push((off, r.bytes.len()));
        commits += r.ends_commit() as usize;
        off += r.bytes.len();
    }
    let end = off;
    let parse = t.elapsed().as_secs_f64();
    let n = spans.len() as f64;
    println!("{} records in {commits} commits, {:.0} B/record", spans.len(), end as f64 / n);

    let t = Instant::now();
    let mut v = chain::start(&bytes[..HEADER_LEN]);
    for &(o, len) in &spans {
        v = chain::step(&v, &bytes[o..o + len]);
    }
    let per_record = t.elapsed().as_secs_f64();
    std::hint::black_box(v);

    let t = Instant::now();
    let mut framed = 0;
    let mut pos = HEADER_LEN;
    while pos < end {
        framed += format::frame(&bytes[pos..end], salt, format::MAX_PAYLOAD_LEN).unwrap();
        pos = HEADER_LEN + framed;
    }
    let v3 = FileHeader { version: chain::PER_COMMIT_VERSION, ..header };
    let mut linker = Linker::new(&v3, chain::start(&v3.encode()), 0);
    linker.feed(&bytes[HEADER_LEN..end], HEADER_LEN as u64, |_, _, _| {});
    std::hint::black_box(linker.value());
    let per_commit = t.elapsed().as_secs_f64();
    println!(
        "one thread, ns/record: parse with checksum {:.0}; chain per record (v1, v2) {:.0}; \
         chain per commit (v3, framing included) {:.0}: {:.1}x less",
        parse * 1e9 / n,
        per_record * 1e9 / n,
        per_commit * 1e9 / n,
        per_record / per_commit
    );

    let log = Log::open(path.as_ref(), Options { read_only: true, ..Options::default() }).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let done = log.verify(None, None).unwrap();
        let s = t.elapsed().as_secs_f64();
        println!("verify: {:.0} MB/s ({:.0} ns/record, {} seals)", mb / s, s * 1e9 / n, done.seals_checked);
    }
}
