//! Measures the core's cost per record for one large commit, then for replaying it (no
//! Python involved).
//!
//! `cargo run --release --example commit_cost -p memcommit-core -- 1000000`
//!
//! Environment: `KEEP=1` keeps the log and prints its path; `REPLAY_ONLY=PATH` only times a
//! read-only open of PATH; `IN_MEMORY=1` also times the same commit on a log in RAM; `BULK=1`
//! pushes the puts with `Commit::push_puts` (the bulk path), all in one run as the binding
//! pushes a `put_rows` call, and times its steps.

use memcommit_core::{Command, PutCommand};
use memcommit_core::{Durability, Log, Options};
use std::time::Instant;

fn main() {
    if let Ok(path) = std::env::var("REPLAY_ONLY") {
        let t = Instant::now();
        let log = Log::open(std::path::Path::new(&path), Options { read_only: true, ..Options::default() })
            .expect("open");
        println!("replay {} memories: {:.3} s", log.len().expect("len"), t.elapsed().as_secs_f64());
        return;
    }
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("memcommit-commit-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let texts: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "agent {} observed that the deployment of service {} finished with status ok after {} s",
                i % 100,
                i % 977,
                i % 60
            )
        })
        .collect();
    let ids: Vec<String> = (0..n).map(|i| format!("01M8MP0QBW0FVFWMQE{i:08}")).collect();
    let tasks: Vec<String> = (0..1000).map(|i| format!("task-{i}")).collect();
    let cmds: Vec<Command<&str>> = (0..n)
        .map(|i| {
            Command::Put(PutCommand {
                id: ids[i].as_str(),
                kind: "trace",
                text: texts[i].as_str(),
                data: None,
                task: Some(tasks[i % 1000].as_str()),
                tier: None,
                tags: vec![],
                sources: vec![],
                vector: None,
            })
        })
        .collect();
    // No index file at close: the reopen below replays the log.
    let writer = Options { durability: Durability::Commit, index_file_every: 0, ..Options::default() };
    let log = Log::open(&dir.join("log.db"), writer).expect("open");
    if std::env::var("IN_MEMORY").is_ok() {
        let mem = Log::memory(Options::default()).expect("memory log");
        let t = Instant::now();
        mem.commit(&cmds, None, 1).expect("commit");
        let dt = t.elapsed().as_secs_f64();
        println!("in RAM: {:.0} ns/record", dt * 1e9 / n as f64);
    }
    let t = Instant::now();
    if std::env::var("BULK").is_ok() {
        let puts: Vec<PutCommand<&str>> = cmds
            .iter()
            .map(|c| match c {
                Command::Put(p) => p.clone(),
                _ => unreachable!("puts only"),
            })
            .collect();
        let t = Instant::now();
        let mut c = log.begin(None, 1, n).expect("begin");
        c.push_puts(puts.as_slice()).expect("push_puts");
        let pushed = t.elapsed().as_secs_f64();
        let done = c.finish().expect("finish").expect("a commit");
        let finished = t.elapsed().as_secs_f64();
        log.wait_durable(done.end).expect("durable");
        let synced = t.elapsed().as_secs_f64();
        println!(
            "bulk: push_puts {:.3} s, finish {:.3} s, final sync {:.3} s",
            pushed,
            finished - pushed,
            synced - finished
        );
    } else {
        log.commit(&cmds, None, 1).expect("commit");
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "{n} puts in one commit: {:.3} s, {:.0} records/s, {:.0} ns/record",
        dt,
        n as f64 / dt,
        dt * 1e9 / n as f64
    );
    drop(log);
    let t = Instant::now();
    let log =
        Log::open(&dir.join("log.db"), Options { read_only: true, ..Options::default() }).expect("reopen");
    let dt = t.elapsed().as_secs_f64();
    println!(
        "replay: {:.3} s, {:.0} ns/record, index heap {} bytes/memory",
        dt,
        dt * 1e9 / n as f64,
        log.index_heap_bytes() / n
    );
    drop(log);
    if std::env::var("KEEP").is_ok() {
        println!("kept {}", dir.join("log.db").display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
