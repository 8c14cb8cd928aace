//! Log compaction: the compacted log replays to the same state (purged memories aside), keeps
//! every record after the horizon byte for byte, is a fixed point, and survives reopen.

use std::path::Path;

mod common;

use common::{opts, run_history, step, Quiet, T0};
use memcommit_core::compact::{Compacted, Retention};
use memcommit_core::format::{self, Op};
use memcommit_core::{Command, Log, PutCommand, Status, Tier};
use proptest::prelude::*;

/// Everything replay builds that users can see.
/// (memories, entities, finished tasks).
type State = (Vec<String>, Vec<(String, Vec<u8>)>, Vec<bool>);

fn state(log: &Log) -> State {
    let ids: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    let mems = log
        .get_many(&ids)
        .unwrap()
        .into_iter()
        .map(|m| match m {
            None => "-".to_string(),
            Some(m) => {
                let e = m.entry;
                format!(
                    "{:?} {:?} {} {} {} {} {} {:?}",
                    e.tier, e.status, e.lsn, e.created_lsn, e.created_at, e.updated_at, e.moved_at, m.put
                )
            }
        })
        .collect();
    let mut ents = log.entities().unwrap();
    ents.sort();
    let tasks = (0..3).map(|t| log.is_task_finished(&format!("t{t}")).unwrap()).collect();
    (mems, ents, tasks)
}

/// (LSN, op, bytes) of every record of a log file.
fn records(path: &Path) -> Vec<(u64, Op, Vec<u8>)> {
    common::file_records(path, |_, r| (r.lsn, r.op, r.bytes.to_vec()))
}

fn compact(log: &Log, horizon: Option<u64>, retention: &Retention) -> (Compacted, std::sync::Arc<Log>) {
    log.compact(horizon, retention, T0, &mut Quiet).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compacted_logs_replay_to_the_same_state(
        commits in proptest::collection::vec(proptest::collection::vec(step(12, 4), 1..4), 1..40),
        cut in 0.0f64..=1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let log = Log::open(&path, opts()).unwrap();
        run_history(&log, &commits, T0);
        let want = state(&log);
        let head = log.lsn();
        let horizon = (head as f64 * cut) as u64;
        log.flush().unwrap();
        let before = records(&path);
        // A dry run writes nothing and foretells the report.
        let plan = log.compaction_plan(Some(horizon), &Retention::default(), &mut Quiet).unwrap();
        prop_assert_eq!(records(&path), before.clone());
        // The copy made in RAM (what a database engine swaps in) is what the file will hold.
        let (copied, copy) = log.compacted_copy(Some(horizon), &Retention::default(), Some(T0), &mut Quiet).unwrap();
        prop_assert_eq!(records(&path), before.clone());
        let (report, log) = compact(&log, Some(horizon), &Retention::default());
        prop_assert_eq!(&copied.plan, &report.plan);
        prop_assert_eq!(&std::fs::read(&path).unwrap(), &copy);
        let follower = Log::follower(&copy[..64], opts()).unwrap();
        follower.apply_raw(&copy[64..]).unwrap();
        prop_assert_eq!(state(&follower), want.clone());
        prop_assert_eq!(report.plan.horizon, horizon);
        prop_assert_eq!(&plan, &report.plan);
        prop_assert_eq!(state(&log), want.clone());
        // Every record after the horizon, byte for byte and in order (seals aside).
        let after = records(&path);
        let tail = |v: &[(u64, Op, Vec<u8>)]| -> Vec<Vec<u8>> {
            v.iter().filter(|r| r.0 > horizon && r.1 != Op::Seal).map(|r| r.2.clone()).collect()
        };
        prop_assert_eq!(tail(&after), tail(&before));
        // LSNs never renumbered, order kept; every kept record is one of the originals.
        let lsns: Vec<u64> = after.iter().map(|r| r.0).collect();
        prop_assert!(lsns.windows(2).all(|w| w[0] < w[1]));
        for r in after.iter().filter(|r| r.1 != Op::Seal) {
            prop_assert!(before.iter().any(|b| b.2 == r.2));
        }
        // It reopens to the same state, and verifies.
        log.close().unwrap();
        let log = Log::open(&path, opts()).unwrap();
        prop_assert_eq!(state(&log), want.clone());
        prop_assert_eq!(log.verify(None, None).unwrap().seals_checked, 1);
        // Compacting again at the same horizon changes nothing but the seal.
        let once: Vec<Vec<u8>> = records(&path).into_iter().filter(|r| r.1 != Op::Seal).map(|r| r.2).collect();
        let (_, log) = compact(&log, Some(horizon), &Retention::default());
        let twice: Vec<Vec<u8>> = records(&path).into_iter().filter(|r| r.1 != Op::Seal).map(|r| r.2).collect();
        prop_assert_eq!(once, twice);
        prop_assert_eq!(state(&log), want);
        log.close().unwrap();
    }
}

#[test]
fn a_log_with_nothing_to_fold_comes_out_unchanged_but_for_its_seal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.log");
    let log = Log::open(&path, opts()).unwrap();
    for i in 0..50 {
        log.commit(
            &[Command::Put(PutCommand::<String> {
                id: format!("m{i}"),
                kind: "note".into(),
                text: "x".into(),
                ..PutCommand::default()
            })],
            None,
            T0,
        )
        .unwrap();
    }
    log.flush().unwrap();
    let before: Vec<Vec<u8>> = records(&path).into_iter().map(|r| r.2).collect();
    let (report, log) = compact(&log, None, &Retention::default());
    let after = records(&path);
    assert_eq!(after.iter().filter(|r| r.1 != Op::Seal).map(|r| r.2.clone()).collect::<Vec<_>>(), before);
    assert_eq!((report.plan.before, report.plan.after, report.generation), (50, 51, 1));
    assert_eq!(log.info().unwrap().generation, 1);
    // New commits continue the LSNs after the new seal.
    let (first, _) =
        log.commit(&[Command::<String>::FinishTask { task: "t".into() }], None, T0).unwrap().unwrap();
    assert_eq!(first, 52);
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!((log.lsn(), log.len().unwrap()), (52, 50));
    assert!(log.verify(None, None).is_ok());
}

#[test]
fn retention_purges_only_named_memories_with_nothing_after_the_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.log");
    let log = Log::open(&path, opts()).unwrap();
    let day = 86_400_000_000i64;
    let put = |id: &str, kind: &str| {
        Command::Put(PutCommand::<String> {
            id: id.into(),
            kind: kind.into(),
            text: id.into(),
            ..PutCommand::default()
        })
    };
    log.commit(
        &[put("old-trace", "trace"), put("old-fact", "fact"), put("archived", "note"), put("late", "trace")],
        None,
        T0,
    )
    .unwrap();
    log.commit(&[Command::<String>::Move { id: "archived".into(), tier: Tier::Archive }], None, T0).unwrap();
    let horizon = log.lsn();
    log.commit(
        &[Command::<String>::SetStatus { id: "late".into(), status: Status::Stale, reason: None }],
        None,
        T0 + 40 * day,
    )
    .unwrap();
    let retention = Retention {
        archived_older_than_us: Some(30 * day),
        kinds_after_us: vec![("trace".into(), 7 * day)],
        ids: vec![],
        now_us: T0 + 40 * day,
    };
    let (report, log) = log.compact(Some(horizon), &retention, T0 + 40 * day, &mut Quiet).unwrap();
    let mut purged = report.plan.purged.clone();
    purged.sort();
    // "late" is a trace old enough, but it has a record after the horizon: kept.
    assert_eq!(purged, ["archived", "old-trace"]);
    assert!(log.is_purged("archived") && !log.is_purged("late"));
    let got = log.get_many(&["old-trace", "old-fact", "archived", "late"]).unwrap();
    assert_eq!(got.iter().map(Option::is_some).collect::<Vec<_>>(), [false, true, false, true]);
    let r = log.commit(&[Command::<String>::Move { id: "archived".into(), tier: Tier::Long }], None, T0);
    match r {
        Err(memcommit_core::Error::Rejected(rej)) => assert!(rej.reason.contains("purged"), "{}", rej.reason),
        other => panic!("{other:?}"),
    }
}

/// A committer that waits for the lock log compaction holds must not commit to the old
/// generation once the new one has replaced it at the path: its commit would be acknowledged
/// and then lost. It gets an error instead (the store it held is closed), and every commit
/// acknowledged before that is in the new generation.
#[test]
fn a_commit_waiting_for_compaction_is_never_acknowledged_on_the_replaced_generation() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.log");
        let log = Log::open(&path, opts()).unwrap();
        let put = |i: usize| {
            Command::Put(PutCommand::<String> {
                id: format!("m{i}"),
                kind: "note".into(),
                text: "x".repeat(100),
                ..PutCommand::default()
            })
        };
        let cmds: Vec<Command> = (0..20_000).map(put).collect();
        log.commit(&cmds, None, T0).unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let acked = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut acked = Vec::new();
                for i in 1_000_000.. {
                    if i == 1_000_050 {
                        started.store(true, Ordering::SeqCst);
                    }
                    match log.commit(&[put(i)], None, T0) {
                        Ok(_) => acked.push(format!("m{i}")),
                        Err(e) => {
                            // Closed, saying why: compaction replaced the log.
                            let why = match &e {
                                memcommit_core::Error::Closed { why: Some(why), .. } => why.clone(),
                                other => panic!("{other:?}"),
                            };
                            assert!(why.contains("generation 1"), "{why}");
                            break;
                        }
                    }
                }
                acked
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let (_, new) = compact(&log, None, &Retention::default());
            new.close().unwrap();
            writer.join().unwrap()
        });
        let reopened = Log::open(&path, opts()).unwrap();
        let found = reopened.get_many(&acked).unwrap();
        let lost: Vec<&String> =
            acked.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(a, _)| a).collect();
        assert!(
            lost.is_empty(),
            "round {round}: {} acknowledged commits lost, e.g. {:?}",
            lost.len(),
            lost.first()
        );
    }
}

#[test]
fn a_progress_hook_that_fails_stops_compaction_and_leaves_the_old_log() {
    struct Stop;
    impl memcommit_core::compact::Hooks for Stop {
        fn progress(&mut self, _: u64, _: u64) -> memcommit_core::Result<()> {
            Err(memcommit_core::Error::Invalid { field: "interrupted", message: "stopped".into() })
        }
        fn before_swap(&mut self, _: &Compacted) -> memcommit_core::Result<()> {
            panic!("compaction went on past a failed progress hook");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.log");
    let log = Log::open(&path, opts()).unwrap();
    common::fill(&log, 0, 200);
    log.flush().unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = log.compact(None, &Retention::default(), T0, &mut Stop).err().expect("stopped");
    assert!(matches!(err, memcommit_core::Error::Invalid { field: "interrupted", .. }), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(names.iter().all(|n| !n.to_string_lossy().contains("tmp")), "{names:?}");
    assert_eq!(log.info().unwrap().generation, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A copy made without a seal, then the records committed since added to it as records of
    /// its compacted part (its header's `dense_from` moved to the head; the old chain's seals
    /// left out) and a seal after them: what a database engine swaps in while its writers went
    /// on. It replays to the writer's state, its seal follows the head and verifies.
    #[test]
    fn a_copy_without_a_seal_takes_the_later_records_and_a_seal(
        early in proptest::collection::vec(proptest::collection::vec(step(12, 4), 1..4), 1..30),
        late in proptest::collection::vec(proptest::collection::vec(step(12, 4), 1..4), 0..10),
    ) {
        let log = Log::memory(opts()).unwrap();
        run_history(&log, &early, T0);
        let head = log.lsn();
        let (copied, copy) = log.compacted_copy(None, &Retention::default(), None, &mut Quiet).unwrap();
        prop_assert!(copied.seal.is_none());
        prop_assert_eq!(copied.plan.bytes_after as usize, copy.len());
        run_history(&log, &late, T0 + 1_000_000);
        let next = Log::follower(&copy[..64], opts()).unwrap();
        next.apply_raw(&copy[64..]).unwrap();
        prop_assert!(next.raise_dense_from(head.saturating_sub(1)).is_err() || head == 0);
        next.raise_dense_from(log.lsn()).unwrap();
        let (tail, _) = log.read_raw(head, usize::MAX).unwrap();
        let (mut later, mut at) = (Vec::new(), 0);
        while at < tail.len() {
            let n = format::record_len(&tail[at..]);
            if format::view_trusted(&tail[at..at + n]).op != Op::Seal {
                later.extend_from_slice(&tail[at..at + n]);
            }
            at += n;
        }
        next.apply_raw(&later).unwrap();
        prop_assert_eq!(state(&next), state(&log));
        let seal = next.seal(None, T0 + 2_000_000).unwrap();
        prop_assert_eq!(seal.record_lsn, log.lsn() + 1);
        let checked = next.verify(None, None).map(|d| d.seals_checked).map_err(|e| e.to_string());
        prop_assert_eq!(checked, Ok(1));
    }
}
