//! A memory's history: every put, status and move record of it still in the log, oldest first,
//! exactly as the file holds them; after replay, after an open from the index file or from a
//! snapshot, after log compaction (with and without retention), on a reader that refreshes and
//! on a replica. And a history reads that memory's records only: damage to another memory's
//! record does not touch it, while a read of the whole log trips over it.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{file_records, opts, run_history, step, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::format::{self, Op};
use memcommit_core::index_file::{path_for, IndexFileStatus};
use memcommit_core::{Command, Error, Log, Options, PutCommand, Status, Tier};
use proptest::prelude::*;

const TIERS: [Tier; 4] = [Tier::Working, Tier::Mid, Tier::Long, Tier::Archive];

fn put(id: &str, version: usize) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: if version.is_multiple_of(2) { "note".into() } else { "fact".into() },
        // Texts of many lengths: records of one memory differ in size.
        text: format!("{id} version {version} {}", "x".repeat(version * 37 % 300)),
        tags: (0..version % 3).map(|t| format!("g{t}")).collect(),
        ..PutCommand::default()
    })
}

fn status(id: &str, n: usize) -> Command {
    Command::<String>::SetStatus {
        id: id.into(),
        status: if n.is_multiple_of(2) { Status::Stale } else { Status::Active },
        // No reason, a short one, and one longer than a first read of a status record takes.
        reason: match n % 3 {
            0 => None,
            1 => Some(format!("reason {n}")),
            _ => Some(format!("a long reason {n}: {}", "y".repeat(200 + n % 50))),
        },
    }
}

fn moved(id: &str, n: usize) -> Command {
    Command::<String>::Move { id: id.into(), tier: TIERS[n % 4] }
}

/// `memories` memories `m{i}`, then `rounds` commits that give them more versions, status
/// changes and moves, interleaved (several records of one memory in one commit too), a
/// refused commit taken back in between, and some entities, tasks and seals.
fn write(log: &Log, memories: usize, rounds: usize, from: usize) {
    for i in 0..memories {
        log.commit(&[put(&format!("m{i}"), 0)], None, T0).unwrap();
    }
    for r in from..from + rounds {
        let i = r * 7 % memories;
        let id = format!("m{i}");
        let cmds = match r % 5 {
            0 => vec![put(&id, r), status(&id, r)],
            1 => vec![status(&id, r), moved(&id, r), put(&id, r)],
            2 => vec![moved(&id, r)],
            3 => vec![put(&id, r), put(&format!("m{}", (i + 1) % memories), r), moved(&id, r + 1)],
            _ => vec![status(&id, r), status(&id, r + 1)],
        };
        log.commit(&cmds, None, T0 + r as i64).unwrap();
        if r % 9 == 0 {
            // Refused at its end: everything it did is taken back.
            let refused = [put(&id, r + 1000), moved(&id, r), status("no-such-memory", r)];
            assert!(log.commit(&refused, None, T0).is_err());
        }
        if r % 13 == 0 {
            log.write_entities(&[(&format!("lock\0m{i}"), Some(b"{}"))], T0).unwrap();
            log.commit(&[Command::<String>::FinishTask { task: id.clone() }], None, T0).unwrap();
        }
        if r % 40 == 0 {
            log.seal(None, T0).unwrap();
        }
    }
}

/// What a history must be: every put, status and move record of `id` in the file at `path`,
/// in file order (what reading the whole log finds).
fn in_file(path: &Path, id: &str) -> Vec<Vec<u8>> {
    file_records(path, |_, r| {
        (matches!(r.op, Op::Put | Op::Status | Op::Move) && r.key == id.as_bytes()).then(|| r.bytes.to_vec())
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Every history of `ids` on `log` is what the file at `path` holds.
fn check(log: &Log, path: &Path, ids: &[String], what: &str) {
    let mut records = 0;
    for id in ids {
        let want = in_file(path, id);
        assert_eq!(log.history(id).unwrap(), want, "{what}: history of {id}");
        records += want.len();
    }
    assert!(records > ids.len(), "{what}: some memories have several records");
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i}")).chain(["no-such-memory".to_string()]).collect()
}

#[test]
fn history_after_commits_replay_the_index_file_and_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let ids = ids(60);
    let log = Log::open(&path, opts()).unwrap();
    write(&log, 60, 400, 0);
    // A memory with many versions.
    for v in 0..600 {
        let cmd = match v % 3 {
            0 => put("m5", v),
            1 => status("m5", v),
            _ => moved("m5", v),
        };
        log.commit(&[cmd], None, T0).unwrap();
    }
    log.flush().unwrap();
    check(&log, &path, &ids, "the writer, as it committed");
    assert!(log.history("m5").unwrap().len() > 600);
    let snapshot = log.snapshot_json().unwrap();
    log.write_index_file().unwrap();
    log.close().unwrap();

    let from_index = Log::open(&path, opts()).unwrap();
    assert_eq!(from_index.info().unwrap().index_file, IndexFileStatus::Loaded);
    check(&from_index, &path, &ids, "opened from the index file");
    // Commits after an open from the index file link to what it held.
    write(&from_index, 60, 200, 400);
    from_index.flush().unwrap();
    check(&from_index, &path, &ids, "opened from the index file, then more commits");
    from_index.close().unwrap();

    std::fs::remove_file(path_for(&path)).unwrap();
    let replayed = Log::open(&path, opts()).unwrap();
    assert_eq!(replayed.info().unwrap().index_file, IndexFileStatus::Absent);
    check(&replayed, &path, &ids, "opened by a full replay");
    replayed.close().unwrap();

    // The snapshot was taken before the last 200 rounds: those are replayed after it.
    let snap_file = dir.path().join("state.json");
    std::fs::write(&snap_file, &snapshot).unwrap();
    let from_snapshot = Log::open_with_snapshot_file(&path, opts(), &snap_file).unwrap();
    check(&from_snapshot, &path, &ids, "opened from a snapshot");
    write(&from_snapshot, 60, 50, 600);
    from_snapshot.flush().unwrap();
    check(&from_snapshot, &path, &ids, "opened from a snapshot, then more commits");
}

#[test]
fn history_after_log_compaction_with_and_without_retention() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let ids = ids(40);
    let log = Log::open(&path, opts()).unwrap();
    write(&log, 40, 300, 0);
    let horizon = log.lsn();
    // Records after the horizon are all kept, older versions among them.
    write(&log, 40, 200, 300);
    // Memories re-put in reverse: in the compacted log their last puts come in another order
    // than their creation, so the open sorts its entries (and the heads of their links).
    for i in (0..40).rev() {
        log.commit(&[put(&format!("m{i}"), 7)], None, T0).unwrap();
    }
    for r in 0..80 {
        log.commit(&[put(&format!("m{}", r % 40), r), status(&format!("m{}", r % 40), r)], None, T0).unwrap();
    }
    let (_, log) = log.compact(Some(horizon), &Retention::default(), T0, &mut Quiet).unwrap();
    check(&log, &path, &ids, "compacted up to a horizon");
    write(&log, 40, 50, 500);
    log.flush().unwrap();
    check(&log, &path, &ids, "compacted, then more commits");

    // m1..m3 have no record after this horizon: retention purges them.
    let untouched: Vec<String> = (1..4).map(|i| format!("m{i}")).collect();
    let horizon = log.lsn();
    for r in 0..100 {
        let i = 4 + r % 36;
        log.commit(&[put(&format!("m{i}"), r), moved(&format!("m{i}"), r)], None, T0).unwrap();
    }
    let retention = Retention { ids: untouched.clone(), ..Retention::default() };
    let (done, log) = log.compact(Some(horizon), &retention, T0, &mut Quiet).unwrap();
    assert_eq!(done.plan.purged, untouched);
    for id in &untouched {
        assert!(log.history(id).unwrap().is_empty(), "{id} was purged");
    }
    check(&log, &path, &ids, "compacted with retention");
    let (_, log) = log.compact(None, &Retention::default(), T0, &mut Quiet).unwrap();
    check(&log, &path, &ids, "compacted up to the head");
    drop(log);
    let reopened = Log::open(&path, opts()).unwrap();
    check(&reopened, &path, &ids, "the compacted log, opened again");
}

#[test]
fn history_on_a_reader_that_refreshes_and_on_a_replica() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let ids = ids(30);
    let writer = Log::open(&path, opts()).unwrap();
    write(&writer, 30, 100, 0);
    writer.flush().unwrap();
    let reader = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    let replica = Log::replica(&writer.header_bytes(), Options::default()).unwrap();
    let mut after = 0;
    let mut feed = |replica: &Arc<Log>| loop {
        let (bytes, last) = writer.read_raw(after, 4096).unwrap();
        if bytes.is_empty() {
            break;
        }
        replica.apply_raw(&bytes).unwrap();
        after = last;
    };
    feed(&replica);
    check(&reader, &path, &ids, "a reader");
    check(&replica, &path, &ids, "a replica");
    for round in 1..4 {
        write(&writer, 30, 100, round * 100);
        writer.flush().unwrap();
        assert!(reader.refresh().unwrap() > 0);
        feed(&replica);
        check(&reader, &path, &ids, "a reader, refreshed");
        check(&replica, &path, &ids, "a replica, fed more");
    }
}

/// The offset of the first record of `id` with op `op` in the file at `path`.
fn first(path: &Path, id: &str, op: Op) -> u64 {
    let found = file_records(path, |off, r| (r.op == op && r.key == id.as_bytes()).then_some(off));
    found.into_iter().flatten().next().unwrap()
}

/// Flip a byte of the key of the record at `off` in the file at `path`: the record no longer
/// matches its checksum.
fn damage(path: &Path, off: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[off as usize + format::RECORD_HEADER_LEN + 1] ^= 0x55;
    std::fs::write(path, &b).unwrap();
}

#[test]
fn a_history_reads_that_memorys_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let log = Log::open(&path, opts()).unwrap();
    write(&log, 20, 100, 0);
    log.write_index_file().unwrap();
    log.close().unwrap();
    let want: Vec<Vec<Vec<u8>>> = ids(20).iter().map(|id| in_file(&path, id)).collect();
    let statuses = |id: &str| file_records(&path, |_, r| r.op == Op::Status && r.key == id.as_bytes());
    let two =
        ids(20).into_iter().find(|id| id != "m3" && statuses(id).into_iter().filter(|&s| s).count() > 1);
    let two = two.expect("a memory with an older status record");
    let reader = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    assert_eq!(reader.info().unwrap().index_file, IndexFileStatus::Loaded);

    // The first record of m3 (its first put) and an older status record of another memory
    // (whose length the index does not keep) change on disk after the open.
    let (bad, bad_status) = (first(&path, "m3", Op::Put), first(&path, &two, Op::Status));
    damage(&path, bad);
    damage(&path, bad_status);
    for (n, id) in ids(20).iter().enumerate() {
        match id.as_str() {
            _ if id == "m3" || *id == two => {
                let at = if id == "m3" { bad } else { bad_status };
                match reader.history(id) {
                    Err(Error::Corrupt { offset, lsn, reason, .. }) => {
                        assert_eq!((offset, lsn), (at, 0), "{id}: {reason}");
                        assert!(reason.contains("no longer matches its checksum"), "{reason}");
                    }
                    other => panic!("{id}: the damage is reported, not {other:?}"),
                }
            }
            // Every other memory's history is read without reading the damaged records.
            _ => assert_eq!(reader.history(id).unwrap(), want[n], "{id}"),
        }
    }
    // What reading the whole log (the way history used to) meets.
    assert!(
        matches!(reader.read_records(0, 0, usize::MAX), Err(Error::Corrupt { offset, .. }) if offset == bad)
    );
    // A store that opened from the index file never read those records: it opens, and the
    // histories that do not hold them are read.
    drop(reader);
    let reopened = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    assert_eq!(reopened.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_eq!(reopened.history("m7").unwrap(), want[7]);
    assert!(matches!(reopened.history("m3"), Err(Error::Corrupt { offset, .. }) if offset == bad));
}

/// The header of an index file, its version set to 1 and its CRC made to match.
fn as_version_1(index: &Path) {
    let mut b = std::fs::read(index).unwrap();
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&b[..252]);
    b[252..256].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(index, &b).unwrap();
}

#[test]
fn an_index_file_of_version_1_is_ignored_and_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let every = Options { index_file_every: 1, ..opts() };
    let log = Log::open(&path, every.clone()).unwrap();
    write(&log, 20, 100, 0);
    log.close().unwrap();
    let index = path_for(&path);
    as_version_1(&index);
    let log = Log::open(&path, every.clone()).unwrap();
    match log.info().unwrap().index_file {
        IndexFileStatus::Ignored(why) => assert!(why.contains("version 1"), "{why}"),
        other => panic!("a version 1 index file was {other:?}"),
    }
    check(&log, &path, &ids(20), "a replay in place of a version 1 index file");
    log.close().unwrap();
    // The writer removed it and wrote a new one at close.
    let log = Log::open(&path, every).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    check(&log, &path, &ids(20), "the index file written again");
}

#[test]
fn a_snapshot_of_version_2_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let log = Log::open(&path, opts()).unwrap();
    write(&log, 20, 100, 0);
    let text = log.snapshot_json().unwrap();
    log.close().unwrap();
    // What version 2 wrote: the same body, no older records, its own checksum.
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let o = v.as_object_mut().unwrap();
    assert!(o["history"]["off"].as_array().is_some_and(|a| !a.is_empty()));
    o.remove("history");
    o.remove("checksum");
    o.insert("version".into(), 2.into());
    let mut body = serde_json::to_string(&v).unwrap();
    body.pop();
    let sum: String = blake3::hash(body.as_bytes()).as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    match Log::open_with_snapshot(&path, opts(), format!("{body},\"checksum\":\"{sum}\"}}").as_bytes()) {
        Err(Error::SnapshotMismatch { reason, .. }) => {
            assert!(reason.contains("version 2") && reason.contains("take a new snapshot"), "{reason}")
        }
        Err(other) => panic!("not a SnapshotMismatch: {other}"),
        Ok(_) => panic!("a snapshot of version 2 opened"),
    }
}

#[test]
fn a_snapshot_whose_older_records_lie_is_refused_or_its_history_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let log = Log::open(&path, opts()).unwrap();
    write(&log, 20, 100, 0);
    let text = log.snapshot_json().unwrap();
    log.close().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let signed = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut x = v.clone();
        edit(&mut x);
        let o = x.as_object_mut().unwrap();
        o.remove("checksum");
        let mut body = serde_json::to_string(&x).unwrap();
        body.pop();
        let sum: String =
            blake3::hash(body.as_bytes()).as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        format!("{body},\"checksum\":\"{sum}\"}}")
    };
    let open =
        |text: String| Log::open_with_snapshot(&path, Options { read_only: true, ..opts() }, text.as_bytes());
    let refused = |text: String| match open(text) {
        Err(Error::SnapshotMismatch { reason, .. }) => reason,
        Err(other) => panic!("not a SnapshotMismatch: {other}"),
        Ok(_) => panic!("it opened"),
    };
    let end = v["end"].as_u64().unwrap();
    let reason = refused(signed(&|x| x["history"]["off"][0] = end.into()));
    assert!(reason.contains("outside the records the snapshot covers"), "{reason}");
    let reason = refused(signed(&|x| x["history"]["memory"][0] = 20.into()));
    assert!(reason.contains("memory number 20"), "{reason}");
    let reason = refused(signed(&|x| {
        x["history"]["len"].as_array_mut().unwrap().pop();
    }));
    assert!(reason.contains("differ in length"), "{reason}");

    // An older record of one memory pointed at another memory's put (a valid record): the
    // snapshot opens (older records are not read at open), and that history is an error,
    // never another memory's record.
    let memories = &v["memories"];
    let n = v["history"]["memory"][0].as_u64().unwrap() as usize;
    let other = (n + 1) % 20;
    let (at, len) =
        (memories["put_off"][other].as_u64().unwrap(), memories["put_len"][other].as_u64().unwrap());
    let lied = open(signed(&|x| {
        x["history"]["off"][0] = at.into();
        x["history"]["len"][0] = len.into();
    }))
    .unwrap();
    let id = memories["id"][n].as_str().unwrap();
    match lied.history(id) {
        Err(Error::Corrupt { offset, reason, .. }) => {
            assert_eq!(offset, at);
            assert!(
                reason.contains("not one of memory") && reason.contains("does not fit the log"),
                "{reason}"
            );
        }
        other => panic!("history of {id}: {other:?}"),
    }
    assert_eq!(lied.history(memories["id"][other].as_str().unwrap()).unwrap().len(), {
        in_file(&path, memories["id"][other].as_str().unwrap()).len()
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random histories (refused commits, entities and seals among them): each memory's history
    /// is what its file holds, live, from the index file, from a snapshot taken half way, and
    /// after a compaction at a random horizon.
    #[test]
    fn every_history_is_what_the_file_holds(
        commits in proptest::collection::vec(proptest::collection::vec(step(8, 3), 1..5), 1..60),
        cut in 0.0f64..=1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.log");
        let ids: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
        let same = |log: &Log, what: &str| -> Result<(), TestCaseError> {
            for id in &ids {
                prop_assert_eq!(log.history(id).unwrap(), in_file(&path, id), "{}: {}", what, id);
            }
            Ok(())
        };
        let log = Log::open(&path, opts()).unwrap();
        let half = commits.len() / 2;
        run_history(&log, &commits[..half], T0);
        let snapshot = log.snapshot_json().unwrap();
        run_history(&log, &commits[half..], T0 + 1_000_000);
        log.flush().unwrap();
        same(&log, "live")?;
        log.write_index_file().unwrap();
        log.close().unwrap();
        let log = Log::open(&path, opts()).unwrap();
        prop_assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
        same(&log, "from the index file")?;
        log.close().unwrap();
        let log = Log::open_with_snapshot(&path, opts(), snapshot.as_bytes()).unwrap();
        same(&log, "from a snapshot")?;
        let horizon = (log.lsn() as f64 * cut) as u64;
        let (_, log) = log.compact(Some(horizon), &Retention::default(), T0, &mut Quiet).unwrap();
        same(&log, "compacted")?;
        run_history(&log, &commits[..half], T0 + 2_000_000);
        log.flush().unwrap();
        same(&log, "compacted, then more commits")?;
    }
}
