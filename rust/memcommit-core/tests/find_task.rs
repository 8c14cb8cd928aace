//! `find` with a task walks that task's memories only (the index keeps them by task): it
//! must return what testing every memory returns, in creation order, after puts that move a
//! memory from one task to another (in one commit and across commits, one by one and in a bulk
//! run), commits taken back, an open from the index file, from a snapshot, a full replay, and
//! log compaction that replays memories out of creation order.

mod common;

use common::{opts, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::format::{memory, view_trusted};
use memcommit_core::index_file::{path_for, IndexFileStatus};
use memcommit_core::{Command, Expect, Log, MemoryRead, PutCommand, Query, Status};
use proptest::prelude::*;

const TASKS: [Option<&str>; 4] = [None, Some("t0"), Some("t1"), Some("t2")];

fn put(id: usize, task: usize, kind: usize) -> PutCommand<String> {
    PutCommand {
        id: format!("m{id}"),
        kind: ["note", "fact"][kind % 2].into(),
        text: format!("memory {id} in task {task}"),
        task: TASKS[task % TASKS.len()].map(Into::into),
        ..PutCommand::default()
    }
}

/// One commit of the workload.
#[derive(Clone, Debug)]
enum Step {
    /// Puts of (memory, task, kind), one commit.
    Puts(Vec<(usize, usize, usize)>),
    /// The same puts, refused at the end by a guard: nothing of it stays.
    Refused(Vec<(usize, usize, usize)>),
    /// Mark a memory stale (if it exists).
    Stale(usize),
    /// A bulk run of puts (`push_puts`): memories `from..from + n`, each to task `id + shift`.
    Bulk { from: usize, n: usize, shift: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let puts = prop::collection::vec((0usize..40, 0usize..4, 0usize..2), 1..6);
    prop_oneof![
        4 => puts.clone().prop_map(Step::Puts),
        1 => puts.prop_map(Step::Refused),
        1 => (0usize..40).prop_map(Step::Stale),
        1 => (0usize..3000, 2100usize..2600, 0usize..4)
            .prop_map(|(from, n, shift)| Step::Bulk { from, n, shift }),
    ]
}

fn puts(p: &[(usize, usize, usize)]) -> Vec<Command> {
    p.iter().map(|&(i, t, k)| Command::Put(put(i, t, k))).collect()
}

fn run(log: &Log, steps: &[Step]) {
    for s in steps {
        match s {
            Step::Puts(p) => {
                log.commit(&puts(p), None, T0).unwrap();
            }
            Step::Refused(p) => {
                let mut cmds = puts(p);
                cmds.push(Command::Expect(Expect {
                    id: "never".into(),
                    exists: Some(true),
                    ..Expect::default()
                }));
                assert!(log.commit(&cmds, None, T0).is_err());
            }
            Step::Stale(i) => {
                // Refused (and taken back) if the memory does not exist yet.
                let id = format!("m{i}");
                let _ =
                    log.commit(&[Command::SetStatus { id, status: Status::Stale, reason: None }], None, T0);
            }
            Step::Bulk { from, n, shift } => {
                let owned: Vec<PutCommand<String>> =
                    (*from..from + n).map(|i| put(i, i + shift, i)).collect();
                let run: Vec<PutCommand<&str>> = owned
                    .iter()
                    .map(|p| PutCommand {
                        id: p.id.as_str(),
                        kind: p.kind.as_str(),
                        text: p.text.as_str(),
                        task: p.task.as_deref(),
                        ..PutCommand::default()
                    })
                    .collect();
                let mut c = log.begin(None, T0, run.len()).unwrap();
                c.push_puts(run.as_slice()).unwrap();
                let done = c.finish().unwrap().unwrap();
                log.wait_durable(done.end).unwrap();
            }
        }
    }
}

/// A memory's id and task, from its put record.
fn id_task(m: &MemoryRead) -> (String, Option<String>) {
    let rec = view_trusted(&m.put);
    let body = memory::decode_put(rec.payload).expect("a put record");
    (rec.key_str().to_string(), body.head.task.map(String::from))
}

/// The ids `find` returns for `q`.
fn ids(log: &Log, q: &Query<'_>) -> Vec<String> {
    log.find(q).unwrap().iter().map(|m| id_task(m).0).collect()
}

/// Every query with a task returns what the same query without one, filtered by task, does.
fn check(log: &Log, what: &str) {
    assert!(!ids(log, &Query::default()).is_empty(), "{what}: the workload made memories");
    for task in TASKS.iter().flatten() {
        for (kind, status, limit) in [
            (None, None, None),
            (Some("fact"), None, None),
            (None, Some(Status::Active), None),
            (None, None, Some(3)),
            (Some("note"), Some(Status::Stale), Some(2)),
        ] {
            let q = Query { kind, status, limit, ..Query::default() };
            let scanned: Vec<String> = log
                .find(&Query { limit: None, ..q.clone() })
                .unwrap()
                .iter()
                .map(id_task)
                .filter(|(_, t)| t.as_deref() == Some(*task))
                .map(|(id, _)| id)
                .take(limit.unwrap_or(usize::MAX))
                .collect();
            let got = ids(log, &Query { task: Some(task), ..q });
            assert_eq!(
                got, scanned,
                "{what}: task {task}, kind {kind:?}, status {status:?}, limit {limit:?}"
            );
        }
    }
    assert!(ids(log, &Query { task: Some("no-such-task"), ..Query::default() }).is_empty(), "{what}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn find_by_task_returns_what_a_scan_does(
        steps in prop::collection::vec(step(), 1..30),
        more in prop::collection::vec(step(), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let log = Log::open(&path, opts()).unwrap();
        run(&log, &steps);
        // Some memory with a task, whatever the workload drew.
        log.commit(&[Command::Put(put(7, 1, 0))], None, T0).unwrap();
        check(&log, "the writer");
        let horizon = log.lsn();
        let snapshot = log.snapshot_json().unwrap();
        // Re-puts in reverse order of creation, each to another task: a compacted log holds
        // the memories out of creation order, and the open that replays it sorts them.
        for i in (0..40).rev() {
            log.commit(&[Command::Put(put(i, i + 1, i))], None, T0).unwrap();
        }
        run(&log, &more);
        check(&log, "the writer, after re-puts");
        log.write_index_file().unwrap();
        log.close().unwrap();
        drop(log);

        let log = Log::open(&path, opts()).unwrap();
        prop_assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
        check(&log, "opened from the index file");
        run(&log, &more);
        check(&log, "opened from the index file, then more commits");
        log.close().unwrap();
        drop(log);

        // The snapshot was taken before the re-puts: those are replayed after it.
        let snap = dir.path().join("state.json");
        std::fs::write(&snap, &snapshot).unwrap();
        let log = Log::open_with_snapshot_file(&path, opts(), &snap).unwrap();
        check(&log, "opened from a snapshot");
        drop(log);

        let _ = std::fs::remove_file(path_for(&path));
        let log = Log::open(&path, opts()).unwrap();
        prop_assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Absent);
        check(&log, "replayed");
        let (_, log) = log.compact(Some(horizon), &Retention::default(), T0, &mut Quiet).unwrap();
        check(&log, "compacted");
        run(&log, &more);
        check(&log, "compacted, then more commits");
    }
}
