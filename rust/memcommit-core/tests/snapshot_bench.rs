//! Timing, printed and never asserted: opening a log of 100,000 memories by a full replay and
//! from a snapshot. Run it with a release build:
//!
//! ```text
//! cargo test --release -p memcommit-core --test snapshot_bench -- --ignored --nocapture
//! ```

use std::time::{Duration, Instant};

use memcommit_core::{Command, Durability, Log, Options, PutCommand, Status, Tier};

const T0: i64 = 1_700_000_000_000_000;
const MEMORIES: usize = 100_000;

fn opts() -> Options {
    Options { durability: Durability::None, index_file_every: 0, ..Options::default() }
}

/// The fastest of `runs` timings of `f`.
fn best(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one run")
}

/// Open the log at `path` by a full replay and from `snap`, and print the best timings.
fn time_both(what: &str, path: &std::path::Path, snap: &str) {
    let size = std::fs::metadata(path).unwrap().len();
    let read_only = Options { read_only: true, ..opts() };
    let replay = best(5, || {
        let l = Log::open(path, read_only.clone()).unwrap();
        assert_eq!(l.len().unwrap(), MEMORIES);
        l.close().unwrap();
    });
    let from_snapshot = best(5, || {
        let l = Log::open_with_snapshot(path, read_only.clone(), snap.as_bytes()).unwrap();
        assert_eq!(l.len().unwrap(), MEMORIES);
        l.close().unwrap();
    });
    println!(
        "{what}: {MEMORIES} memories, log {size} bytes, snapshot {} bytes: open by replay {replay:.1?}, \
         open from the snapshot {from_snapshot:.1?} (best of 5, read-only)",
        snap.len()
    );
}

fn put(i: usize, version: usize) -> Command {
    Command::Put(PutCommand::<String> {
        id: format!("mem-{i:08}"),
        kind: if i.is_multiple_of(3) { "fact" } else { "note" }.into(),
        text: format!("the text of memory {i}, version {version}, a sentence or two long as notes are"),
        task: Some(format!("task-{}", i % 50)),
        tags: vec!["a".into(), format!("t{}", i % 7)],
        ..PutCommand::default()
    })
}

#[test]
#[ignore = "a timing to read, run with --release -- --ignored --nocapture"]
fn time_open_by_replay_and_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.log");
    let log = Log::open(&path, opts()).unwrap();
    for batch in 0..MEMORIES / 100 {
        let mut cmds = Vec::with_capacity(110);
        for i in batch * 100..batch * 100 + 100 {
            cmds.push(put(i, 0));
            let id = format!("mem-{i:08}");
            if i.is_multiple_of(10) {
                cmds.push(Command::SetStatus { id: id.clone(), status: Status::Stale, reason: None });
            }
            if i % 10 == 5 {
                cmds.push(Command::Move { id, tier: Tier::Long });
            }
        }
        log.commit(&cmds, None, T0 + batch as i64).unwrap();
    }
    let snap = log.snapshot_json().unwrap();
    log.flush().unwrap();
    time_both("each memory written once", &path, &snap);

    // The same memories rewritten four times over: replay reads five puts of each, the
    // snapshot's check only the last.
    for version in 1..5 {
        for batch in 0..MEMORIES / 100 {
            let cmds: Vec<Command> = (batch * 100..batch * 100 + 100).map(|i| put(i, version)).collect();
            log.commit(&cmds, None, T0 + batch as i64).unwrap();
        }
    }
    let snap = log.snapshot_json().unwrap();
    log.close().unwrap();
    time_both("each memory written five times", &path, &snap);
}
