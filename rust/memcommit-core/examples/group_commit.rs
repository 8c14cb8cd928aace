//! Durable single-put commits from several threads: commits/s and commits per fsync.
//!
//! `cargo run --release --example group_commit -p memcommit-core -- 8 1000`

use memcommit_core::{log::put, Durability, Log, Options};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let per: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = std::env::temp_dir().join(format!("memcommit-group-commit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log =
        Log::open(&dir.join("log.db"), Options { durability: Durability::Commit, ..Options::default() })
            .expect("open");
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..threads {
            let log = &log;
            s.spawn(move || {
                for i in 0..per {
                    let text = format!("thread {k} memory {i}: about a hundred and twenty characters of text, padded out to length");
                    log.commit(&[put(&format!("{k}-{i}"), "trace", &text)], None, 1).expect("commit");
                }
            });
        }
    });
    let dt = t.elapsed().as_secs_f64();
    let n = threads * per;
    let fsyncs = log.info().expect("info").fsyncs;
    println!(
        "{threads} threads: {:.0} commits/s, {:.1} commits per fsync",
        n as f64 / dt,
        n as f64 / fsyncs as f64
    );
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}
