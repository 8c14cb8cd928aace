//! A snapshot is only trusted as far as it is checked: its checksum covers every byte of it,
//! and every record it points to must be there and say what it says. An edited snapshot
//! (with or without a recomputed checksum) is refused with `SnapshotMismatch` naming the
//! snapshot file; any snapshot a store writes opens to the state a full replay gives.

mod common;

use std::path::{Path, PathBuf};

use common::{fill, opts, run_history, step, view, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::format::Op;
use memcommit_core::{Error, Log, Query};
use proptest::prelude::*;
use serde_json::Value;

const SUFFIX: &str = ",\"checksum\":\"";

/// A log filled by `fill`, its snapshot written to a file beside it; the log closed.
fn setup(dir: &Path) -> (PathBuf, PathBuf, Value) {
    let path = dir.join("s.log");
    let log = Log::open(&path, opts()).unwrap();
    fill(&log, 0, 40);
    log.seal(None, T0).unwrap();
    let text = log.snapshot_json().unwrap();
    log.close().unwrap();
    let snap = dir.join("state.json");
    std::fs::write(&snap, &text).unwrap();
    (path, snap, serde_json::from_str(&text).unwrap())
}

/// `value` as a snapshot's text, with a checksum computed over it as a writer would.
fn with_checksum(value: &Value) -> String {
    let mut v = value.clone();
    v.as_object_mut().unwrap().remove("checksum");
    let mut body = serde_json::to_string(&v).unwrap();
    body.pop();
    let sum: String = blake3::hash(body.as_bytes()).as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("{body}{SUFFIX}{sum}\"}}")
}

/// The snapshot `v` changed by `edit`, with its checksum recomputed over the change.
fn edited(v: &Value, edit: impl FnOnce(&mut Value)) -> String {
    let mut x = v.clone();
    edit(&mut x);
    with_checksum(&x)
}

/// Open `log` with the snapshot `text`, written to `file`; the refusal's reason.
fn refused(log: &Path, file: &Path, text: &str) -> String {
    std::fs::write(file, text).unwrap();
    match Log::open_with_snapshot_file(log, opts(), file) {
        Err(Error::SnapshotMismatch { path, reason }) => {
            assert_eq!(path, file.display().to_string(), "the error names the snapshot file");
            let shown = Error::SnapshotMismatch { path: path.clone(), reason: reason.clone() }.to_string();
            assert!(shown.starts_with(&format!("{}:", file.display())), "{shown}");
            reason
        }
        Err(other) => panic!("not a SnapshotMismatch: {other}"),
        Ok(_) => panic!("an altered snapshot opened"),
    }
}

/// The records of a log file: (offset, op, key, LSN).
fn records(path: &Path) -> Vec<(u64, Op, String, u64)> {
    common::file_records(path, |off, r| (off, r.op, r.key_str().to_string(), r.lsn))
}

/// The column position of memory `id` in a snapshot.
fn pos(v: &Value, id: &str) -> usize {
    v["memories"]["id"].as_array().unwrap().iter().position(|x| x == id).unwrap()
}

fn set(v: &mut Value, column: &str, i: usize, to: Value) {
    v["memories"][column][i] = to;
}

#[test]
fn an_untouched_snapshot_file_opens_to_the_state_of_a_full_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, _) = setup(dir.path());
    let full = Log::open(&path, opts()).unwrap();
    let want = view(&full, 40);
    full.close().unwrap();
    let log = Log::open_with_snapshot_file(&path, opts(), &snap).unwrap();
    assert_eq!(view(&log, 40), want);
}

#[test]
fn any_edit_that_keeps_the_old_checksum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, v) = setup(dir.path());
    let text = std::fs::read_to_string(&snap).unwrap();
    let (body, sum) = text.rsplit_once(SUFFIX).unwrap();
    // A tier changed in place, the checksum left as it was.
    let i = pos(&v, "m1");
    let edited_text = edited(&v, |x| set(x, "tier", i, 2.into()));
    let (edited_body, _) = edited_text.rsplit_once(SUFFIX).unwrap();
    assert_ne!(edited_body, body);
    let reason = refused(&path, &snap, &format!("{edited_body}{SUFFIX}{sum}"));
    assert!(reason.contains("checksum does not match"), "{reason}");
    // One byte of the body changed.
    let flipped = text.replacen("\"generation\":0", "\"generation\":1", 1);
    assert_ne!(flipped, text);
    assert!(refused(&path, &snap, &flipped).contains("checksum does not match"));
    // The checksum itself changed.
    let first = sum.as_bytes()[0];
    let other = if first == b'0' { '1' } else { '0' };
    let bad_sum = format!("{body}{SUFFIX}{other}{}", &sum[1..]);
    assert!(refused(&path, &snap, &bad_sum).contains("checksum does not match"));
    // The checksum removed, or the text reformatted.
    assert!(refused(&path, &snap, &format!("{body}}}")).contains("checksum does not match"));
    assert!(refused(&path, &snap, &format!("{text}\n")).contains("checksum does not match"));
    // And the original still opens.
    std::fs::write(&snap, &text).unwrap();
    Log::open_with_snapshot_file(&path, opts(), &snap).unwrap().close().unwrap();
}

#[test]
fn a_snapshot_without_a_checksum_is_refused_with_advice_to_take_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, mut v) = setup(dir.path());
    // What version 1 wrote: the same body, no checksum.
    v["version"] = 1.into();
    v.as_object_mut().unwrap().remove("checksum");
    let reason = refused(&path, &snap, &serde_json::to_string(&v).unwrap());
    assert!(reason.contains("version 1") && reason.contains("take a new snapshot"), "{reason}");
    // Not a snapshot at all.
    assert!(refused(&path, &snap, "{\"hello\": 1}").contains("not a snapshot"));
    assert!(refused(&path, &snap, "{").contains("not a snapshot"));
}

#[test]
fn a_recomputed_checksum_over_a_changed_tier_or_status_is_refused_by_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, v) = setup(dir.path());
    // m1: never moved, active; its put says working.
    let i = pos(&v, "m1");
    assert_eq!((v["memories"]["tier"][i].clone(), v["memories"]["status"][i].clone()), (0.into(), 0.into()));
    let text = edited(&v, |x| set(x, "tier", i, 2.into()));
    let reason = refused(&path, &snap, &text);
    assert!(
        reason.contains("\"m1\"") && reason.contains("tier \"long\"") && reason.contains("put record"),
        "{reason}"
    );
    let text = edited(&v, |x| set(x, "status", i, 1.into()));
    let reason = refused(&path, &snap, &text);
    assert!(reason.contains("\"m1\"") && reason.contains("status \"stale\""), "{reason}");
    // m7 was moved to long after its put: its move record says so.
    let i = pos(&v, "m7");
    assert_eq!(v["memories"]["tier"][i], 2);
    let text = edited(&v, |x| set(x, "tier", i, 0.into()));
    let reason = refused(&path, &snap, &text);
    assert!(reason.contains("\"m7\"") && reason.contains("move record"), "{reason}");
    // m5 was staled after its put: its status record says so.
    let i = pos(&v, "m5");
    assert_eq!(v["memories"]["status"][i], 1);
    let text = edited(&v, |x| set(x, "status", i, 0.into()));
    let reason = refused(&path, &snap, &text);
    assert!(reason.contains("\"m5\"") && reason.contains("status record"), "{reason}");
    // Forgetting the status record does not help: the put says active, the snapshot stale.
    let text = edited(&v, |x| set(x, "status_off", i, (-1).into()));
    let reason = refused(&path, &snap, &text);
    assert!(reason.contains("\"m5\"") && reason.contains("status"), "{reason}");
    // Nor do other fields: kind, task, LSN, creation.
    for (column, to, what) in [
        ("kind", Value::from(0), "kind"),
        ("task", Value::from(0), "task"),
        ("lsn", Value::from(1), "newest record"),
        ("created_lsn", Value::from(3), "created_lsn"),
        ("updated_at", Value::from(5), "newest record"),
    ] {
        let text = edited(&v, |x| set(x, column, pos(&v, "m3"), to));
        let reason = refused(&path, &snap, &text);
        assert!(reason.contains("\"m3\"") && reason.contains(what), "{column}: {reason}");
    }
}

#[test]
fn a_recomputed_checksum_over_an_offset_moved_to_another_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, v) = setup(dir.path());
    let recs = records(&path);
    let at = |op: Op, key: &str| recs.iter().find(|r| r.1 == op && r.2 == key).unwrap().0;
    let i = pos(&v, "m3");
    // Its put pointed at another memory's put (a valid record), the length made to fit.
    let other = at(Op::Put, "m4");
    let len = recs.iter().position(|r| r.0 == other).map(|n| recs[n + 1].0 - other).unwrap();
    let text = edited(&v, |x| {
        set(x, "put_off", i, other.into());
        set(x, "put_len", i, len.into());
    });
    let reason = refused(&path, &snap, &text);
    assert!(
        reason.contains("\"m3\"") && reason.contains("\"m4\"") && reason.contains(&other.to_string()),
        "{reason}"
    );
    // At a status record of another memory.
    let text = edited(&v, |x| set(x, "put_off", i, at(Op::Status, "m5").into()));
    assert!(refused(&path, &snap, &text).contains("a status record of \"m5\""));
    // Into the middle of a record.
    let text =
        edited(&v, |x| set(x, "put_off", i, (v["memories"]["put_off"][i].as_u64().unwrap() + 3).into()));
    assert!(refused(&path, &snap, &text).contains("holds no record"));
    // A status record pointed at for a memory that has none (m5's, for m3).
    let text = edited(&v, |x| set(x, "status_off", i, at(Op::Status, "m5").into()));
    let reason = refused(&path, &snap, &text);
    assert!(reason.contains("\"m3\"") && reason.contains("\"m5\""), "{reason}");
    // m5's status pointed at m10's status record (stale too).
    let text = edited(&v, |x| set(x, "status_off", pos(&v, "m5"), at(Op::Status, "m10").into()));
    assert!(refused(&path, &snap, &text).contains("\"m10\""));
    // A move pointed at a put.
    let text = edited(&v, |x| set(x, "move_off", pos(&v, "m7"), at(Op::Put, "m7").into()));
    assert!(refused(&path, &snap, &text).contains("move"));
    // An entity's record moved to a memory's put.
    let text = edited(&v, |x| x["entities"][0][1] = at(Op::Put, "m0").into());
    assert!(refused(&path, &snap, &text).contains("entity"));
    // A seal's record moved.
    let text = edited(&v, |x| x["seals"][0]["offset"] = at(Op::Put, "m0").into());
    assert!(refused(&path, &snap, &text).contains("seal"));
    // The sparse index sent to another record.
    let text = edited(&v, |x| x["sparse"][0][1] = at(Op::Put, "m2").into());
    assert!(refused(&path, &snap, &text).contains("sparse"));
    // Past the snapshot's end.
    let text = edited(&v, |x| set(x, "move_off", pos(&v, "m7"), (v["end"].as_u64().unwrap() + 10).into()));
    assert!(refused(&path, &snap, &text).contains("\"m7\""));
    // And with the checksum recomputed over no change, it opens.
    Log::open_with_snapshot_file(&path, opts(), &{
        std::fs::write(&snap, with_checksum(&v)).unwrap();
        snap.clone()
    })
    .unwrap()
    .close()
    .unwrap();
}

#[test]
fn a_writer_opened_from_a_refused_snapshot_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, snap, v) = setup(dir.path());
    let before = std::fs::read(&path).unwrap();
    let text = edited(&v, |x| set(x, "tier", pos(&v, "m1"), 3.into()));
    refused(&path, &snap, &text);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_snapshot_given_as_text_is_checked_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, v) = setup(dir.path());
    let text = edited(&v, |x| set(x, "tier", pos(&v, "m1"), 3.into()));
    match Log::open_with_snapshot(&path, opts(), text.as_bytes()) {
        Err(Error::SnapshotMismatch { reason, .. }) => assert!(reason.contains("tier"), "{reason}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("an altered snapshot opened"),
    }
}

// ---------------------------------------------------------------------------------------------
// Every snapshot a store writes passes the checks: histories with puts over moves and status
// changes, restores, entities, seals, and log compaction.

fn state(log: &Log) -> String {
    let ids: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    let mems: Vec<String> = log
        .get_many(&ids)
        .unwrap()
        .into_iter()
        .map(|m| {
            // Kinds, tasks, tag sets and places in the id arena are numbered in the order they
            // were first seen (a refused commit's too): compared by name below, and through
            // the put record's bytes.
            m.map_or("-".into(), |m| {
                let e = memcommit_core::Entry { hash: 0, id_off: 0, kind: 0, task: 0, tags: 0, ..m.entry };
                format!("{e:?} {:?}", m.put)
            })
        })
        .collect();
    let mut found: Vec<Vec<u64>> = Vec::new();
    let mut by = |q: Query<'_>| found.push(log.find(&q).unwrap().iter().map(|m| m.entry.put_off).collect());
    for kind in ["trace", "fact"] {
        by(Query { kind: Some(kind), ..Query::default() });
    }
    for tag in ["g0", "g1", "g2"] {
        by(Query { tags: Some(&[tag.to_string()]), ..Query::default() });
    }
    for task in ["t2", "t3"] {
        by(Query { task: Some(task), ..Query::default() });
    }
    let mut ents = log.entities().unwrap();
    ents.sort();
    let tasks: Vec<bool> = (0..4).map(|t| log.is_task_finished(&format!("t{t}")).unwrap()).collect();
    format!("{mems:?} {found:?} {ents:?} {tasks:?} {:?} {}", log.seals().unwrap(), log.lsn())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_snapshot_a_store_writes_opens_to_the_state_of_a_full_replay(
        before in proptest::collection::vec(proptest::collection::vec(step(10, 3), 1..4), 1..30),
        after in proptest::collection::vec(proptest::collection::vec(step(10, 3), 1..4), 0..10),
        compact_at in proptest::option::of(0.0f64..=1.0),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.log");
        let mut log = Log::open(&path, opts()).unwrap();
        run_history(&log, &before, T0);
        if let Some(cut) = compact_at {
            let horizon = (log.lsn() as f64 * cut) as u64;
            log = log.compact(Some(horizon), &Retention::default(), T0, &mut Quiet).unwrap().1;
            run_history(&log, &before[..before.len() / 2], T0 + 10_000_000);
        }
        let snap = log.snapshot_json().unwrap();
        run_history(&log, &after, T0 + 20_000_000);
        log.close().unwrap();
        let full = Log::open(&path, opts()).unwrap();
        let want = state(&full);
        full.close().unwrap();
        let from_snap = match Log::open_with_snapshot(&path, opts(), snap.as_bytes()) {
            Ok(l) => l,
            Err(e) => return Err(TestCaseError::fail(format!("a store's own snapshot was refused: {e}"))),
        };
        prop_assert_eq!(state(&from_snap), want);
        from_snap.close().unwrap();
    }
}
