//! `Commit::push_puts` (the bulk path of `put_many` and `put_rows`) writes the records
//! `Commit::push` writes for the same puts, byte for byte, and takes them back the same way.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use memcommit_core::format::{FileHeader, FORMAT_VERSION};
use memcommit_core::{Command, Durability, Log, Options, PutCommand, Status, Tier};

const AT: i64 = 1_760_000_000_000_000;

fn opts() -> Options {
    // Durability "commit": the log is durable to the end of each commit, so the records of
    // the next one carry durable_gaps that grow from zero (and saturate 2 MiB on).
    Options { durability: Durability::Commit, index_file_every: 0, ..Options::default() }
}

/// A new log at `dir/name` with a fixed store id, so that two logs get the same bytes.
fn log_at(dir: &Path, name: &str) -> (PathBuf, Arc<Log>) {
    let path = dir.join(name);
    let header =
        FileHeader { version: FORMAT_VERSION, store_id: *b"memcommit-bulk-1", generation: 0, dense_from: 0 };
    std::fs::write(&path, header.encode()).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    (path, log)
}

fn text(i: usize) -> String {
    format!("memory {i}: {}", "the quick brown fox jumps over the lazy dog ".repeat(1 + i % 7))
}

struct Puts {
    ids: Vec<String>,
    texts: Vec<String>,
    tasks: Vec<String>,
    data: String,
}

impl Puts {
    fn new(n: usize, prefix: &str) -> Puts {
        Puts {
            ids: (0..n).map(|i| format!("{prefix}-{i:07}")).collect(),
            texts: (0..n).map(text).collect(),
            tasks: (0..50).map(|t| format!("agent/task-{t}")).collect(),
            data: r#"{"source":"bulk","n":[1,2,3]}"#.to_string(),
        }
    }

    /// Every field in use somewhere: tasks, data, tags, sources, tiers, kinds, and ids that
    /// repeat inside the run (`dups`: the put `i` reuses the id of put `i - 1000`) or that
    /// an earlier commit created (`old`).
    fn commands<'a>(&'a self, old: &'a [String], dups: bool) -> Vec<PutCommand<&'a str>> {
        const TAGS: [&str; 3] = ["alpha", "beta", "gamma"];
        let id_of = |i: usize| {
            if dups && i % 97 == 5 && i >= 1000 {
                self.ids[i - 1000].as_str()
            } else if i % 89 == 3 && !old.is_empty() {
                old[i % old.len()].as_str()
            } else {
                self.ids[i].as_str()
            }
        };
        (0..self.ids.len())
            .map(|i| {
                let id = id_of(i);
                PutCommand {
                    id,
                    kind: ["trace", "fact", "note"][i % 3],
                    text: self.texts[i].as_str(),
                    data: (i % 5 == 0).then_some(self.data.as_str()),
                    task: (i % 4 != 0).then(|| self.tasks[i % self.tasks.len()].as_str()),
                    tier: [None, Some(Tier::Mid), Some(Tier::Long)][i % 3],
                    tags: TAGS[..i % 4].to_vec(),
                    // An earlier put of the run (the writer refuses a source no put made).
                    sources: if i % 11 == 0 { vec![id_of(i / 2)] } else { vec![] },
                    vector: None,
                }
            })
            .collect()
    }
}

/// The same commits, one written with `push` per put, the other with `push_puts` per run.
fn write_both(
    dir: &Path,
    runs: &[Vec<PutCommand<&str>>],
    before: &[Command<&str>],
    after: &[Command<&str>],
) -> (Vec<u8>, Vec<u8>) {
    let mut files = Vec::new();
    for bulk in [false, true] {
        let (path, log) = log_at(dir, if bulk { "bulk.log" } else { "each.log" });
        // A first commit the runs find in the index: old ids, one moved and one stale.
        let first: Vec<Command<&str>> = (0..40)
            .map(|i| {
                Command::Put(PutCommand {
                    id: OLD[i % OLD.len()],
                    kind: "fact",
                    text: "an old one",
                    ..PutCommand::default()
                })
            })
            .chain([
                Command::Move { id: OLD[0], tier: Tier::Archive },
                Command::SetStatus { id: OLD[1], status: Status::Stale, reason: Some("superseded") },
            ])
            .collect();
        log.commit(&first, None, AT).unwrap();
        for (k, run) in runs.iter().enumerate() {
            let at = AT + 1_000 * (k as i64 + 1);
            if bulk {
                // As the binding does while it reads a put_rows call's rows: room made in
                // the index, faulted in. It changes no byte written.
                log.make_room(0, run.len()).populate(&AtomicBool::new(false));
            }
            let mut c = log.begin(None, at, run.len()).unwrap();
            for cmd in before {
                c.push(cmd).unwrap();
            }
            if bulk {
                c.push_puts(run.as_slice()).unwrap();
            } else {
                for p in run {
                    c.push(&Command::Put(p.clone())).unwrap();
                }
            }
            for cmd in after {
                c.push(cmd).unwrap();
            }
            let done = c.finish().unwrap().unwrap();
            log.wait_durable(done.end).unwrap();
        }
        log.close().unwrap();
        drop(log);
        files.push(std::fs::read(&path).unwrap());
    }
    let bulk = files.pop().unwrap();
    (files.pop().unwrap(), bulk)
}

const OLD: [&str; 4] = ["old-a", "old-b", "old-c", "old-d"];

fn old() -> Vec<String> {
    OLD.iter().map(|s| s.to_string()).collect()
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[test]
fn a_bulk_run_writes_the_records_push_writes_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let old = old();
    // 30,000 puts of 100-400 bytes: several 1 MiB chunks, and past 2 MiB, where durable_gap
    // saturates; then a run just above the small-run threshold, and one below it.
    let big = Puts::new(30_000, "big");
    let mid = Puts::new(2_500, "mid");
    let small = Puts::new(300, "small");
    let runs = vec![big.commands(&old, true), mid.commands(&old, false), small.commands(&[], false)];
    let (each, bulk) = write_both(dir.path(), &runs, &[], &[]);
    assert!(each.len() > 8 << 20, "the runs span many chunks ({} bytes)", each.len());
    assert_eq!(first_difference(&each, &bulk), None, "the two logs differ");
    // And they read back as the same store.
    let a = Log::open(&dir.path().join("each.log"), opts()).unwrap();
    let b = Log::open(&dir.path().join("bulk.log"), opts()).unwrap();
    assert_eq!(a.len().unwrap(), b.len().unwrap());
    assert_eq!(a.lsn(), b.lsn());
    let ids = ["big-0001006", "old-b", "big-0029999"];
    let (ra, rb) = (a.get_many(&ids).unwrap(), b.get_many(&ids).unwrap());
    for (x, y) in ra.iter().zip(&rb) {
        let (x, y) = (x.as_ref().unwrap(), y.as_ref().unwrap());
        assert_eq!((x.entry, &x.put), (y.entry, &y.put));
    }
}

#[test]
fn a_bulk_run_between_other_operations_of_its_commit_writes_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let old = old();
    let run = Puts::new(6_000, "run");
    let before = [Command::Move { id: OLD[2], tier: Tier::Long }];
    let after = [
        Command::SetStatus { id: "run-0000007", status: Status::Stale, reason: None },
        Command::FinishTask { task: "agent/task-3" },
    ];
    let (each, bulk) = write_both(dir.path(), &[run.commands(&old, true)], &before, &after);
    assert_eq!(first_difference(&each, &bulk), None, "the two logs differ");
}

#[test]
fn a_refused_bulk_run_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, log) = log_at(dir.path(), "refused.log");
    log.commit(
        &[Command::Put(PutCommand { id: "keep", kind: "fact", text: "kept", ..PutCommand::default() })],
        None,
        AT,
    )
    .unwrap();
    let size = log.info().unwrap().bytes;
    let (lsn, len) = (log.lsn(), log.len().unwrap());
    let puts = Puts::new(20_000, "never");
    // A bad put late in the run (an empty kind) refuses it with its own error, after the
    // chunks before it were applied and written: dropping the commit takes them all back.
    let mut cmds = puts.commands(&[], false);
    cmds[18_321].kind = "";
    {
        let mut c = log.begin(None, AT + 5, cmds.len()).unwrap();
        let err = c.push_puts(cmds.as_slice()).unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
        assert!(std::fs::metadata(&path).unwrap().len() > size + (3 << 20), "chunks were written");
    }
    assert_eq!((log.lsn(), log.len().unwrap()), (lsn, len));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), log.info().unwrap().bytes);
    assert!(log.get_many(&["never-0000001"]).unwrap()[0].is_none());
    // A guard after a run that was already written out refuses the commit: the run's chunks
    // are cut off again.
    let cmds = puts.commands(&[], false);
    {
        let mut c = log.begin(None, AT + 6, cmds.len()).unwrap();
        c.push_puts(cmds.as_slice()).unwrap();
        let guard = memcommit_core::Expect { id: "keep", exists: Some(false), ..Default::default() };
        assert!(c.push(&Command::Expect(guard)).is_err());
    }
    assert_eq!((log.lsn(), log.len().unwrap()), (lsn, len));
    assert!(log.get_many(&["never-0000001"]).unwrap()[0].is_none());
    log.close().unwrap();
    drop(log);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size, "the cut-off chunks are gone");
    let reopened = Log::open(&path, opts()).unwrap();
    assert_eq!((reopened.lsn(), reopened.len().unwrap()), (lsn, len));
}

#[test]
fn kinds_and_tasks_are_told_apart_by_their_bytes_wherever_they_lie() {
    // The run's kinds and tasks are slices of two strings: some start at the same address
    // with different lengths ("task-1", "task-10", "task-100"), and equal ones lie at
    // different addresses (a copy). Each memory must be found under its own kind and task,
    // and the index must hold exactly the kinds and tasks of a store written put by put.
    let dir = tempfile::tempdir().unwrap();
    let tasks_text = String::from("task-100");
    let tasks_copy = tasks_text.clone();
    let kinds_text = String::from("factual");
    let kinds_copy = kinds_text.clone();
    let tasks = [&tasks_text[..6], &tasks_text[..7], &tasks_text[..8], &tasks_copy[..7]];
    let kinds = [&kinds_text[..4], &kinds_text[..], &kinds_copy[..4]];
    let ids: Vec<String> = (0..6_000).map(|i| format!("m-{i:05}")).collect();
    let puts: Vec<PutCommand<&str>> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| PutCommand {
            id: id.as_str(),
            kind: kinds[i % kinds.len()],
            text: "a memory",
            task: Some(tasks[i % tasks.len()]),
            ..PutCommand::default()
        })
        .collect();
    let mut stores = Vec::new();
    for bulk in [false, true] {
        let (_, log) = log_at(dir.path(), if bulk { "bulk.log" } else { "each.log" });
        let mut c = log.begin(None, AT, puts.len()).unwrap();
        if bulk {
            c.push_puts(puts.as_slice()).unwrap();
        } else {
            for p in &puts {
                c.push(&Command::Put(p.clone())).unwrap();
            }
        }
        let done = c.finish().unwrap().unwrap();
        log.wait_durable(done.end).unwrap();
        stores.push(log);
    }
    for (kind, task) in
        [("fact", "task-1"), ("fact", "task-10"), ("factual", "task-100"), ("factual", "task-10")]
    {
        let q =
            memcommit_core::Query { kind: Some(kind), task: Some(task), limit: None, ..Default::default() };
        let want: Vec<&str> =
            puts.iter().filter(|p| p.kind == kind && p.task == Some(task)).map(|p| p.id).collect();
        assert!(!want.is_empty(), "{kind} {task}: the run has such memories");
        for log in &stores {
            let got: Vec<String> = log
                .find(&q)
                .unwrap()
                .iter()
                .map(|m| memcommit_core::format::view_trusted(&m.put).key_str().to_string())
                .collect();
            assert_eq!(got, want, "{kind} {task}");
        }
    }
}

#[test]
fn room_is_made_only_in_a_log_that_takes_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, log) = log_at(dir.path(), "room.log");
    assert!(!log.make_room(0, 100_000).is_empty());
    log.close().unwrap();
    drop(log);
    let reader = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    assert!(reader.make_room(0, 100_000).is_empty());
    // While a commit holds the state, making room does not wait for it.
    let (_path, log) = log_at(dir.path(), "busy.log");
    let c = log.begin(None, AT, 1).unwrap();
    assert!(log.make_room(0, 100_000).is_empty());
    drop(c);
}
