//! Snapshots: opening from one gives the state a full replay gives, and a snapshot of another
//! log, generation or history is refused.

mod common;

use common::{assert_same, fill, opts, view, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::{Error, Log};

/// A closed log of 250 puts and a seal, and a snapshot taken after the seal (200 puts in).
fn closed_log_with_snapshot() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let (dir, path, log) = common::new_log();
    fill(&log, 0, 200);
    log.seal(None, T0).unwrap();
    let snap = log.snapshot_json().unwrap();
    fill(&log, 200, 250);
    log.close().unwrap();
    (dir, path, snap)
}

#[test]
fn a_snapshot_opens_to_the_state_of_a_full_replay_and_replays_only_what_follows() {
    let (_dir, path, snap) = closed_log_with_snapshot();

    let full = Log::open(&path, opts()).unwrap();
    let want = view(&full, 300);
    let chain = full.chain_value().unwrap();
    full.close().unwrap();
    let from_snap = Log::open_with_snapshot(&path, opts(), snap.as_bytes()).unwrap();
    assert_same(&view(&from_snap, 300), &want);
    assert_eq!(from_snap.chain_value().unwrap(), chain, "the chain continues from the snapshot's");
    // It keeps working: commits, seals, verify.
    fill(&from_snap, 250, 260);
    from_snap.seal(None, T0).unwrap();
    assert_eq!(from_snap.verify(None, None).unwrap().seals_checked, 2);
    let tags = ["b".to_string()];
    let q = memcommit_core::Query { tags: Some(&tags), ..Default::default() };
    assert_eq!(from_snap.find(&q).unwrap().len(), 130);
}

#[test]
fn a_snapshot_of_another_log_generation_or_history_is_refused() {
    let (dir, path, log) = common::new_log();
    fill(&log, 0, 20);
    let snap = log.snapshot_json().unwrap();

    // Another store.
    let other_path = dir.path().join("o.log");
    let other = Log::open(&other_path, opts()).unwrap();
    fill(&other, 0, 20);
    other.close().unwrap();
    assert!(matches!(
        Log::open_with_snapshot(&other_path, opts(), snap.as_bytes()),
        Err(Error::SnapshotMismatch { .. })
    ));

    // Not JSON, or not a snapshot.
    assert!(matches!(
        Log::open_with_snapshot(&other_path, opts(), b"{"),
        Err(Error::SnapshotMismatch { .. })
    ));
    assert!(matches!(
        Log::open_with_snapshot(&other_path, opts(), b"{}"),
        Err(Error::SnapshotMismatch { .. })
    ));

    // The same store after log compaction: another generation.
    let (_, log) = log.compact(None, &Retention::default(), T0, &mut Quiet).unwrap();
    log.close().unwrap();
    match Log::open_with_snapshot(&path, opts(), snap.as_bytes()) {
        Err(Error::SnapshotMismatch { reason, .. }) => assert!(reason.contains("generation"), "{reason}"),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a snapshot of generation 0 opened a log of generation 1"),
    }
}

#[test]
fn a_snapshot_whose_last_record_differs_from_the_logs_is_refused() {
    let (dir, path, log) = common::new_log();
    fill(&log, 0, 20);
    let snap = log.snapshot_json().unwrap();
    log.close().unwrap();
    // A copy of the store that took another path from the same point: same store id and
    // generation, but its records at the snapshot's end differ.
    let copy = dir.path().join("copy.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes.truncate(n - 1);
    std::fs::write(&copy, &bytes).unwrap();
    assert!(matches!(
        Log::open_with_snapshot(&copy, opts(), snap.as_bytes()),
        Err(Error::SnapshotMismatch { .. })
    ));
}

#[test]
fn a_follower_of_a_logs_bytes_restores_a_snapshot_and_replays_only_what_follows() {
    let (_dir, path, snap) = closed_log_with_snapshot();
    let image = std::fs::read(&path).unwrap();

    let full = Log::open(&path, opts()).unwrap();
    let want = view(&full, 300);
    let chain = full.chain_value().unwrap();
    full.close().unwrap();
    let follower = Log::follower_with_snapshot(image.clone(), opts(), snap.as_bytes(), "s.json").unwrap();
    assert_same(&view(&follower, 300), &want);
    assert_eq!(follower.chain_value().unwrap(), chain, "the chain continues from the snapshot's");
    // It takes commits of its own, and its records are the ones a file would hold next.
    let before = follower.len().unwrap();
    fill(&follower, 250, 260);
    follower.seal(None, T0).unwrap();
    assert!(follower.len().unwrap() > before);
    assert_eq!(follower.verify(None, None).unwrap().seals_checked, 2);

    // Bytes that stop before the snapshot's end, or are another store's, are refused by name.
    let short = image[..image.len() / 2].to_vec();
    match Log::follower_with_snapshot(short, opts(), snap.as_bytes(), "s.json") {
        Err(Error::SnapshotMismatch { path, .. }) => assert_eq!(path, "s.json"),
        other => panic!("expected SnapshotMismatch, got {:?}", other.map(|_| ())),
    }
    let (_dir2, _path2, stranger) = common::new_log();
    fill(&stranger, 0, 10);
    let theirs = stranger.snapshot_json().unwrap();
    assert!(matches!(
        Log::follower_with_snapshot(image.clone(), opts(), theirs.as_bytes(), "t.json"),
        Err(Error::SnapshotMismatch { .. })
    ));
    // Records after the snapshot that end inside a commit are damage, not a torn tail to drop.
    let cut = image[..image.len() - 3].to_vec();
    assert!(matches!(
        Log::follower_with_snapshot(cut, opts(), snap.as_bytes(), "s.json"),
        Err(Error::Corrupt { .. })
    ));
}
