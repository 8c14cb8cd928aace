//! What automatic sealing costs batched commits: `cargo run --release --example auto_seal`.
//!
//! Writes `N` puts (default 1,000,000) in commits of `BATCH` (default 1,000) with durability
//! `none`, without and then with `AutoSeal { every: 1000 }`, and prints puts/s for both.

use std::time::Instant;

use memcommit_core::log::AutoSeal;
use memcommit_core::{Command, Durability, Log, Options, PutCommand};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run(n: usize, batch: usize, auto: bool) -> (f64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let log =
        Log::open(&dir.path().join("a.log"), Options { durability: Durability::None, ..Options::default() })
            .unwrap();
    if auto {
        log.set_auto_seal(Some(AutoSeal { every: 1000, key: None })).unwrap();
    }
    let text = "agent 42 observed that the deploy of service billing-api to eu-west finished with \
                three retries; latency p99 rose to 412 ms.";
    let t = Instant::now();
    let mut i = 0;
    while i < n {
        let cmds: Vec<Command> = (i..(i + batch).min(n))
            .map(|j| {
                Command::Put(PutCommand::<String> {
                    id: format!("m{j:012}"),
                    kind: "trace".into(),
                    text: text.into(),
                    ..PutCommand::default()
                })
            })
            .collect();
        log.commit(&cmds, None, 0).unwrap();
        i += batch;
    }
    let secs = t.elapsed().as_secs_f64();
    let seals = log.seals().unwrap().len();
    if auto {
        eprintln!("  {} of {seals} seals waited for the chain thread", log.auto_seal_waits());
    }
    log.close().unwrap();
    (secs, seals)
}

fn main() {
    let (n, batch) = (env("N", 1_000_000), env("BATCH", 1000));
    for _ in 0..3 {
        let (plain, _) = run(n, batch, false);
        let (sealed, seals) = run(n, batch, true);
        println!(
            "plain {:.0} puts/s, auto-sealed {:.0} puts/s ({seals} seals), overhead {:+.1}%",
            n as f64 / plain,
            n as f64 / sealed,
            100.0 * (sealed / plain - 1.0)
        );
    }
}
