//! Time opening a log, as many times as asked, and say how the index file was used.
//!
//! cargo run --release --example open_time -p memcommit-core -- LOG [RUNS]
//!
//! RUNS 0: open as the writer and save the index file instead.

use std::time::Instant;

use memcommit_core::{Log, Options};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: open_time LOG [RUNS]");
    let runs: usize = args.next().map_or(5, |r| r.parse().expect("RUNS is a number"));
    if runs == 0 {
        let log = Log::open(path.as_ref(), Options::default()).expect("open");
        log.write_index_file().expect("write the index file");
        return;
    }
    for _ in 0..runs {
        let t = Instant::now();
        let log = Log::open(path.as_ref(), Options { read_only: true, ..Options::default() }).expect("open");
        let took = t.elapsed();
        let info = log.info().expect("info");
        println!(
            "{:>8.1} ms  {} memories  index file: {}",
            took.as_secs_f64() * 1e3,
            info.memories,
            info.index_file
        );
        let t = Instant::now();
        drop(log);
        println!("   drop {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    }
}
