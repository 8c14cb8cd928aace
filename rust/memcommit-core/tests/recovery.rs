//! Recovery and format tests of the log engine: round trip, torn tails at every byte,
//! exhaustive single-bit flips, LSN continuity, mid-log damage, readers, group commit.
//!
//! `cargo test -p memcommit-core --test recovery -- --nocapture` prints the sweep summaries.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memcommit_core::format::memory::{self, PutState};
use memcommit_core::format::{self, encode_record, FileHeader, Op, FLAG_COMMIT_END, HEADER_LEN};
use memcommit_core::{
    inspect, truncate, truncate_expecting, Command, Durability, Error, Expect, Log, MemoryRead, Options,
    PutCommand, Query, Status, Tier,
};

const T0: i64 = 1_700_000_000_000_000;

fn opts(durability: Durability) -> Options {
    Options { durability, ..Options::default() }
}

fn writer(path: &Path) -> memcommit_core::Result<Arc<Log>> {
    Log::open(path, opts(Durability::None))
}

/// A new temporary directory and a writer that fsyncs every commit on a new log `name` in it.
fn durable_log(name: &str) -> (tempfile::TempDir, PathBuf, Arc<Log>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let log = Log::open(&path, opts(Durability::Commit)).unwrap();
    (dir, path, log)
}

fn reader(path: &Path) -> memcommit_core::Result<Arc<Log>> {
    Log::open(path, Options { read_only: true, ..opts(Durability::None) })
}

fn put(id: &str, text: &str) -> Command {
    Command::Put(PutCommand { id: id.into(), kind: "note".into(), text: text.into(), ..Default::default() })
}

/// A put with every field in use. Its sources name ids no put made, as an import's may: the
/// logs it goes to trust their sources (`Log::trust_sources`).
fn full_put(id: &str, n: usize) -> PutCommand {
    PutCommand {
        id: id.into(),
        kind: if n.is_multiple_of(2) { "fact".into() } else { "trace".into() },
        text: format!("text of {id}, version {n}: héllo ✓"),
        data: Some(format!("{{\"n\":{n},\"id\":\"{id}\"}}")),
        task: Some(format!("task-{}", n % 3)),
        tier: Some(if n.is_multiple_of(2) { Tier::Mid } else { Tier::Long }),
        tags: vec![format!("tag{}", n % 4), "shared".into()],
        sources: vec!["src-a".into(), format!("src-{n}")],
        vector: None,
    }
}

fn all_records(log: &Log) -> Vec<Vec<u8>> {
    log.read_records(0, 0, usize::MAX).unwrap().0
}

fn lsn_of(rec: &[u8]) -> u64 {
    u64::from_le_bytes(rec[8..16].try_into().unwrap())
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// A commit of `cmds`, unwrapped, returning the (first, last) LSNs.
fn commit(log: &Log, cmds: &[Command], at: i64) -> (u64, u64) {
    log.commit(cmds, None, at).unwrap().expect("the commit wrote records")
}

fn assert_same_read(a: &MemoryRead, b: &MemoryRead) {
    assert_eq!(a.entry, b.entry);
    assert_eq!(a.put, b.put);
    let (pa, pb) = (payload_of(&a.put), payload_of(&b.put));
    let (da, db) = (memory::decode_put(pa).unwrap(), memory::decode_put(pb).unwrap());
    assert_eq!(format!("{da:?}"), format!("{db:?}"));
}

/// The payload of a record's bytes.
fn payload_of(rec: &[u8]) -> &[u8] {
    let key_len = u16::from_le_bytes([rec[24], rec[25]]) as usize;
    &rec[format::RECORD_HEADER_LEN + key_len..rec.len() - format::RECORD_TRAILER_LEN]
}

fn key_of(rec: &[u8]) -> &str {
    let key_len = u16::from_le_bytes([rec[24], rec[25]]) as usize;
    std::str::from_utf8(&rec[format::RECORD_HEADER_LEN..format::RECORD_HEADER_LEN + key_len]).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Format round trip
// ---------------------------------------------------------------------------------------------

#[test]
fn round_trip_every_op_survives_reopen() {
    let (_dir, path, log) = durable_log("rt.log");
    log.trust_sources(true);
    let mut at = T0;
    let mut tick = || {
        at += 1_000;
        at
    };

    // Puts with every field.
    for i in 0..6 {
        commit(&log, &[Command::Put(full_put(&format!("m{i}"), i))], tick());
    }
    // A plain put with nothing optional.
    commit(&log, &[put("plain", "")], tick());
    // Stale with a reason, stale without, restore.
    commit(
        &log,
        &[Command::SetStatus { id: "m0".into(), status: Status::Stale, reason: Some("superseded".into()) }],
        tick(),
    );
    commit(&log, &[Command::SetStatus { id: "m1".into(), status: Status::Stale, reason: None }], tick());
    commit(&log, &[Command::SetStatus { id: "m1".into(), status: Status::Active, reason: None }], tick());
    // Moves to every tier.
    for (i, tier) in [Tier::Working, Tier::Mid, Tier::Long, Tier::Archive].into_iter().enumerate() {
        commit(&log, &[Command::Move { id: format!("m{}", i + 2), tier }], tick());
    }
    // Finish a task.
    commit(&log, &[Command::FinishTask { task: "task-1".into() }], tick());
    // A multi-record commit with guards: create, update, stale, move, finish.
    let lsn_m2 = log.get_many(&["m2"]).unwrap()[0].as_ref().unwrap().entry.lsn;
    let head = log.lsn();
    let (first, last) = log
        .commit(
            &[
                Command::Expect(Expect { id: "new1".into(), exists: Some(false), ..Default::default() }),
                Command::Put(full_put("new1", 10)),
                Command::Expect(Expect { id: "new1".into(), exists: Some(true), ..Default::default() }),
                Command::Expect(Expect {
                    id: "m2".into(),
                    status: Some(Status::Active),
                    tier: Some(Tier::Working),
                    lsn: Some(lsn_m2),
                    ..Default::default()
                }),
                Command::Put(full_put("m2", 11)),
                Command::SetStatus { id: "new1".into(), status: Status::Stale, reason: Some("test".into()) },
                Command::Move { id: "new1".into(), tier: Tier::Archive },
                Command::FinishTask { task: "task-2".into() },
            ],
            Some(head),
            tick(),
        )
        .unwrap()
        .unwrap();
    assert_eq!((first, last), (head + 1, head + 5));
    // A commit a guard refuses writes nothing.
    let before = log.info().unwrap();
    let refused = log.commit(
        &[
            put("never", "x"),
            Command::Expect(Expect { id: "m0".into(), status: Some(Status::Active), ..Default::default() }),
        ],
        None,
        tick(),
    );
    assert!(matches!(refused, Err(Error::Rejected(_))), "{refused:?}");
    let refused = log.commit(&[put("never", "x")], Some(head), tick());
    assert!(matches!(refused, Err(Error::Rejected(_))), "{refused:?}");
    assert_eq!(log.info().unwrap().records, before.records);
    assert!(!log.contains("never").unwrap());
    // Another multi-record commit of puts only.
    commit(&log, &[put("a", "1"), put("b", "2"), put("a", "3")], tick());

    let ids: Vec<String> =
        ["m0", "m1", "m2", "m3", "m4", "m5", "plain", "new1", "a", "b", "never", "missing"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let tags = vec!["shared".to_string()];
    let tag0 = vec!["tag0".to_string(), "shared".to_string()];
    let queries = [
        Query::default(),
        Query { tier: Some(Tier::Archive), ..Default::default() },
        Query { status: Some(Status::Stale), ..Default::default() },
        Query { kind: Some("fact"), ..Default::default() },
        Query { task: Some("task-1"), ..Default::default() },
        Query { tags: Some(&tags), ..Default::default() },
        Query { tags: Some(&tag0), limit: Some(1), ..Default::default() },
        Query { kind: Some("no-such-kind"), ..Default::default() },
    ];

    let info1 = log.info().unwrap();
    let reads1 = log.get_many(&ids).unwrap();
    let finds1: Vec<Vec<MemoryRead>> = queries.iter().map(|q| log.find(q).unwrap()).collect();
    let records1 = all_records(&log);
    let chain1 = log.chain_value().unwrap();
    assert_eq!(info1.records, records1.len() as u64);
    assert_eq!(info1.lsn, records1.len() as u64);
    assert_eq!(info1.memories, 10);
    log.close().unwrap();
    // Closed, the file holds the log and nothing else (the space written ahead is cut).
    assert_eq!(info1.bytes, file_len(&path));
    drop(log);

    let log = Log::open(&path, opts(Durability::Commit)).unwrap();
    let info2 = log.info().unwrap();
    assert_eq!(
        (info2.records, info2.lsn, info2.memories, info2.bytes, info2.generation, &info2.store_id),
        (info1.records, info1.lsn, info1.memories, info1.bytes, info1.generation, &info1.store_id)
    );
    assert_eq!(info2.recovered_bytes, 0);
    let reads2 = log.get_many(&ids).unwrap();
    assert_eq!(reads1.len(), reads2.len());
    for (id, (a, b)) in ids.iter().zip(reads1.iter().zip(&reads2)) {
        match (a, b) {
            (Some(a), Some(b)) => assert_same_read(a, b),
            (None, None) => assert!(id == "never" || id == "missing", "{id} vanished"),
            _ => panic!("{id}: {a:?} != {b:?}"),
        }
    }
    for (q, before) in queries.iter().zip(&finds1) {
        let after = log.find(q).unwrap();
        assert_eq!(before.len(), after.len(), "{q:?}");
        for (a, b) in before.iter().zip(&after) {
            assert_same_read(a, b);
        }
    }
    assert_eq!(all_records(&log), records1);
    assert_eq!(log.chain_value().unwrap(), chain1);
    assert!(log.is_task_finished("task-1").unwrap());
    assert!(log.is_task_finished("task-2").unwrap());
    assert!(!log.is_task_finished("task-0").unwrap());

    // The decoded content is what was put.
    let by_id = |id: &str| reads2[ids.iter().position(|x| x == id).unwrap()].clone().unwrap();
    let m4 = by_id("m4");
    let body = memory::decode_put(payload_of(&m4.put)).unwrap();
    let want = full_put("m4", 4);
    assert_eq!(body.head.kind, want.kind);
    assert_eq!(body.head.task, want.task.as_deref());
    assert_eq!(body.head.tags, want.tags.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(body.sources, want.sources.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(body.text, want.text);
    assert_eq!(body.data, want.data.as_deref());
    assert_eq!(m4.entry.tier, Tier::Long, "moved");
    assert_eq!(by_id("m5").entry.tier, Tier::Archive, "moved");
    assert_eq!(by_id("m0").entry.status, Status::Stale);
    assert_eq!(by_id("m1").entry.status, Status::Active);
    let m2 = by_id("m2");
    let body = memory::decode_put(payload_of(&m2.put)).unwrap();
    assert_eq!(body.text, full_put("m2", 11).text);
    // An update keeps tier, status and creation.
    assert_eq!(body.head.state.tier, Tier::Working);
    assert_eq!(body.head.state.created_lsn, 3);
    assert_eq!(m2.entry.created_lsn, 3);
    let new1 = by_id("new1");
    assert_eq!((new1.entry.status, new1.entry.tier), (Status::Stale, Tier::Archive));
    let a = by_id("a");
    assert_eq!(memory::decode_put(payload_of(&a.put)).unwrap().text, "3");
    log.close().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Torn tails
// ---------------------------------------------------------------------------------------------

/// A commit boundary: the offset after it, and the records and LSN up to it.
#[derive(Clone, Copy, Debug)]
struct Boundary {
    end: u64,
    records: u64,
}

/// Build a log of 30 commits, some of several records; returns its bytes and boundaries
/// (the first boundary is the end of the header).
fn build_torn_source(path: &Path) -> (Vec<u8>, Vec<Boundary>) {
    let log = writer(path).unwrap();
    log.trust_sources(true);
    let mut bounds = vec![Boundary { end: HEADER_LEN as u64, records: 0 }];
    for i in 0..30 {
        let at = T0 + i as i64 * 1_000;
        let cmds = match i % 4 {
            1 => vec![
                Command::Put(full_put(&format!("a{i}"), i)),
                put(&format!("b{i}"), "second of three"),
                put(&format!("c{i}"), "third of three"),
            ],
            3 => vec![
                Command::Move { id: format!("a{}", i - 2), tier: Tier::Long },
                Command::SetStatus {
                    id: format!("b{}", i - 2),
                    status: Status::Stale,
                    reason: Some("old".into()),
                },
                Command::FinishTask { task: format!("task-{i}") },
            ],
            _ => vec![put(&format!("s{i}"), &"x".repeat(i * 3))],
        };
        commit(&log, &cmds, at);
        let info = log.info().unwrap();
        bounds.push(Boundary { end: info.bytes, records: info.records });
    }
    log.close().unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len() as u64, bounds.last().unwrap().end);
    (bytes, bounds)
}

#[test]
fn torn_tail_at_every_byte_of_the_last_three_commits() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.log");
    let (bytes, bounds) = build_torn_source(&src);
    let original = all_records(&reader(&src).unwrap());
    let n = bounds.len();
    // The last three commits include multi-record ones.
    assert!(bounds[n - 1].records - bounds[n - 2].records > 1);
    assert!(bounds[n - 3].records - bounds[n - 4].records > 1);

    let cut_path = dir.path().join("cut.log");
    let from = bounds[n - 4].end;
    let mut cuts = 0;
    let mut recovered_total = 0;
    let cut_lock = dir.path().join("cut.log.lock");
    for cut in from..=bytes.len() as u64 {
        std::fs::write(&cut_path, &bytes[..cut as usize]).unwrap();
        // A crash tore these bytes: no clean close came after them. (The last round's close
        // left a marker saying its own log, which these bytes replace, was durable to its end.)
        let _ = std::fs::remove_file(&cut_lock);
        let b = *bounds.iter().rev().find(|b| b.end <= cut).unwrap();
        let log = writer(&cut_path).unwrap_or_else(|e| panic!("cut at {cut}: open failed: {e}"));
        let info = log.info().unwrap();
        assert_eq!(info.records, b.records, "cut at {cut}");
        assert_eq!(info.lsn, b.records, "cut at {cut}");
        assert_eq!(info.bytes, b.end, "cut at {cut}");
        assert_eq!(info.recovered_bytes, cut - b.end, "cut at {cut}");
        assert_eq!(file_len(&cut_path), b.end, "cut at {cut}: the torn tail was not truncated");
        assert_eq!(all_records(&log), original[..b.records as usize], "cut at {cut}");
        recovered_total += info.recovered_bytes;
        // The log takes a new commit and reopens with it.
        let (first, last) = commit(&log, &[put("after-cut", "new")], T0 + 99_000_000);
        assert_eq!((first, last), (b.records + 1, b.records + 1), "cut at {cut}");
        log.close().unwrap();
        drop(log);
        let log = writer(&cut_path).unwrap_or_else(|e| panic!("cut at {cut}: reopen failed: {e}"));
        let info = log.info().unwrap();
        assert_eq!((info.records, info.recovered_bytes), (b.records + 1, 0), "cut at {cut}");
        assert!(log.contains("after-cut").unwrap());
        log.close().unwrap();
        cuts += 1;
    }
    println!(
        "torn tail: {cuts} cut offsets ({from}..={}), {recovered_total} bytes recovered in all, 0 false accepts, 0 false rejects",
        bytes.len()
    );
}

/// A deterministic xorshift generator for garbage bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn zeros_garbage_and_foreign_records_after_a_clean_log_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.log");
    let (bytes, bounds) = build_torn_source(&src);
    let last = *bounds.last().unwrap();
    let original = all_records(&reader(&src).unwrap());

    // A record of another store (another salt), whole and cut short.
    let mut foreign = Vec::new();
    encode_record(&mut foreign, Op::Put, FLAG_COMMIT_END, 0, 0xdead_beef, last.records + 1, T0, b"x", |o| {
        memory::encode_put(
            o,
            PutState {
                tier: Tier::Working,
                status: Status::Active,
                created_lsn: 0,
                created_at: T0,
                moved_at: T0,
            },
            &PutCommand::<String> {
                id: "x".into(),
                kind: "note".into(),
                text: "foreign".into(),
                ..Default::default()
            },
        )
    });
    // A whole commit's first record without its end: an unfinished commit.
    let header = FileHeader::decode(&bytes[..HEADER_LEN]).unwrap();
    let mut unfinished = Vec::new();
    encode_record(&mut unfinished, Op::Task, 0, 0, header.salt(), last.records + 1, T0, b"t", |o| o.push(1));

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let tails: Vec<(&str, Vec<u8>)> = vec![
        ("4096 zeros", vec![0; 4096]),
        ("1 zero", vec![0]),
        ("40 zeros", vec![0; 40]),
        ("random garbage 4096", rng.bytes(4096)),
        ("random garbage 7", rng.bytes(7)),
        ("record magic then garbage", [&b"CM"[..], &rng.bytes(100)].concat()),
        ("foreign-store record", foreign.clone()),
        ("foreign-store record cut short", foreign[..foreign.len() - 3].to_vec()),
        ("unfinished commit", unfinished.clone()),
        ("unfinished commit then zeros", [&unfinished[..], &[0u8; 512][..]].concat()),
    ];
    let path = dir.path().join("tail.log");
    for (what, tail) in &tails {
        std::fs::write(&path, [&bytes[..], &tail[..]].concat()).unwrap();
        // A reader sees the whole commits and leaves the file alone.
        let r = reader(&path).unwrap_or_else(|e| panic!("{what}: reader open failed: {e}"));
        assert_eq!(r.info().unwrap().records, last.records, "{what}");
        assert_eq!(file_len(&path), bytes.len() as u64 + tail.len() as u64, "{what}: a reader truncated");
        drop(r);
        let log = writer(&path).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        let info = log.info().unwrap();
        assert_eq!((info.records, info.lsn), (last.records, last.records), "{what}");
        assert_eq!(info.recovered_bytes, tail.len() as u64, "{what}");
        assert_eq!(file_len(&path), bytes.len() as u64, "{what}");
        assert_eq!(all_records(&log), original, "{what}");
        assert!(!log.contains("x").unwrap(), "{what}");
        log.close().unwrap();
    }

    // A copy of an old record of the same store at the tail: stale bytes, never acknowledged
    // (an acknowledged record would carry the next LSN), so a tail to cut.
    let dup = original[3].clone();
    std::fs::write(&path, [&bytes[..], &dup[..]].concat()).unwrap();
    let log = writer(&path).unwrap_or_else(|e| panic!("a duplicated old record at the tail: {e}"));
    assert_eq!(
        (log.info().unwrap().records, log.info().unwrap().recovered_bytes),
        (last.records, dup.len() as u64)
    );
    assert_eq!(all_records(&log), original);
    assert_eq!(file_len(&path), bytes.len() as u64);
    log.close().unwrap();
    // The same stale record followed by a record with the next LSN is damage in committed
    // data: open refuses and cuts nothing.
    let mut next = Vec::new();
    encode_record(&mut next, Op::Task, FLAG_COMMIT_END, 0, header.salt(), last.records + 1, T0, b"t", |o| {
        o.push(1)
    });
    let damaged = [&bytes[..], &dup[..], &next[..]].concat();
    std::fs::write(&path, &damaged).unwrap();
    match writer(&path) {
        Err(Error::Corrupt { offset, lsn, .. }) => assert_eq!((offset, lsn), (last.end, last.records + 1)),
        other => panic!("a stale record before a newer one: {:?}", other.map(|_| ())),
    }
    assert_eq!(file_len(&path), damaged.len() as u64, "a refused open must not truncate");
    // The newer record alone would have been fine: it is the next commit.
    std::fs::write(&path, [&bytes[..], &next[..]].concat()).unwrap();
    let log = writer(&path).unwrap();
    assert_eq!(log.info().unwrap().records, last.records + 1);
    assert!(log.is_task_finished("t").unwrap());
    log.close().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Single-bit flips
// ---------------------------------------------------------------------------------------------

#[test]
fn every_single_bit_flip_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.log");
    // Durable commits: each one's records say the commits before it were durable when it was
    // written, so a flip before the last commit is damage in committed data.
    let log = Log::open(&src, opts(Durability::Commit)).unwrap();
    log.trust_sources(true);
    let mut at = T0;
    let mut c = |cmds: &[Command]| {
        at += 1;
        commit(&log, cmds, at);
    };
    c(&[put("a", "one")]);
    c(&[put("b", "two"), put("c", "3")]);
    c(&[Command::SetStatus { id: "a".into(), status: Status::Stale, reason: Some("r".into()) }]);
    c(&[Command::Move { id: "b".into(), tier: Tier::Long }]);
    c(&[Command::FinishTask { task: "t".into() }]);
    c(&[put("a", "uno")]);
    c(&[Command::Put(PutCommand {
        id: "d".into(),
        kind: "k".into(),
        text: "t".into(),
        data: Some("{}".into()),
        task: Some("t".into()),
        tier: Some(Tier::Mid),
        tags: vec!["g".into()],
        sources: vec!["a".into()],
        vector: None,
    })]);
    c(&[put("e", "five"), Command::Move { id: "e".into(), tier: Tier::Archive }]);
    log.close().unwrap();
    drop(log);

    let bytes = std::fs::read(&src).unwrap();
    let original = all_records(&reader(&src).unwrap());
    // Record start offsets, to check where damage is reported.
    let mut starts = Vec::new();
    let mut off = HEADER_LEN;
    for r in &original {
        starts.push(off as u64);
        off += r.len();
    }
    assert_eq!(off, bytes.len());
    assert!(bytes.len() < 1000, "keep the sweep small: {} bytes", bytes.len());
    let record_start = |byte: u64| *starts.iter().rev().find(|&&s| s <= byte).unwrap();

    let path = dir.path().join("flip.log");
    let (mut header, mut mid, mut tail, mut undetected) = (0u64, 0u64, 0u64, 0u64);
    for bit in 0..bytes.len() * 8 {
        let byte = bit / 8;
        let mut b = bytes.clone();
        b[byte] ^= 1 << (bit % 8);
        std::fs::write(&path, &b).unwrap();
        match writer(&path) {
            Err(Error::Corrupt { offset, .. }) => {
                if byte < HEADER_LEN {
                    assert_eq!(offset, 0, "bit {bit}");
                    header += 1;
                } else {
                    assert_eq!(offset, record_start(byte as u64), "bit {bit}: damage reported elsewhere");
                    mid += 1;
                }
            }
            Err(e) => panic!("bit {bit}: unexpected error {e}"),
            Ok(log) => {
                let info = log.info().unwrap();
                let got = all_records(&log);
                let len = file_len(&path);
                if info.recovered_bytes == 0 {
                    undetected += 1;
                }
                assert!(info.recovered_bytes > 0, "bit {bit} (byte {byte}): the flip went unnoticed");
                assert!(got.len() <= original.len(), "bit {bit}");
                assert_eq!(got, original[..got.len()], "bit {bit}: a record changed");
                assert!((byte as u64) >= len, "bit {bit}: byte {byte} survived in a log cut at {len}");
                assert_eq!(len + info.recovered_bytes, bytes.len() as u64, "bit {bit}");
                log.close().unwrap();
                tail += 1;
            }
        }
    }
    let total = bytes.len() as u64 * 8;
    println!(
        "bit flips: {total} flips over {} bytes ({} records): {header} header → Corrupt, {mid} mid-log → Corrupt, \
         {tail} tail → truncated, {undetected} undetected",
        bytes.len(),
        original.len()
    );
    assert_eq!(header + mid + tail, total);
    assert_eq!(undetected, 0);
    assert_eq!(header, HEADER_LEN as u64 * 8);
    assert!(tail > 0 && mid > 0);
}

// ---------------------------------------------------------------------------------------------
// Hand-built files: LSN continuity, foreign salt, impossible state
// ---------------------------------------------------------------------------------------------

const STORE: [u8; 16] = *b"recovery-test-id";

/// One record to hand-build.
enum R<'a> {
    Put(u64, &'a str),
    Status(u64, &'a str),
}

fn build_file(recs: &[(R<'_>, u32)]) -> (Vec<u8>, Vec<u64>) {
    let header =
        FileHeader { version: format::FORMAT_VERSION, store_id: STORE, generation: 0, dense_from: 0 };
    let mut out = header.encode().to_vec();
    let mut offsets = Vec::new();
    for (r, salt) in recs {
        offsets.push(out.len() as u64);
        match *r {
            R::Put(lsn, id) => {
                let p = PutCommand::<String> {
                    id: id.into(),
                    kind: "note".into(),
                    text: id.into(),
                    ..Default::default()
                };
                let st = PutState {
                    tier: Tier::Working,
                    status: Status::Active,
                    created_lsn: 0,
                    created_at: T0,
                    moved_at: T0,
                };
                encode_record(&mut out, Op::Put, FLAG_COMMIT_END, 0, *salt, lsn, T0, id.as_bytes(), |o| {
                    memory::encode_put(o, st, &p)
                });
            }
            R::Status(lsn, id) => {
                encode_record(&mut out, Op::Status, FLAG_COMMIT_END, 0, *salt, lsn, T0, id.as_bytes(), |o| {
                    memory::encode_status(o, Status::Stale, None)
                });
            }
        }
    }
    (out, offsets)
}

fn open_hand_built(dir: &Path, name: &str, bytes: &[u8]) -> (PathBuf, memcommit_core::Result<Arc<Log>>) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let res = writer(&path);
    (path, res)
}

fn expect_corrupt(res: memcommit_core::Result<Arc<Log>>, what: &str) -> (u64, u64, String) {
    match res {
        Err(Error::Corrupt { offset, lsn, reason, .. }) => (offset, lsn, reason),
        Err(e) => panic!("{what}: expected Corrupt, got {e}"),
        Ok(log) => panic!("{what}: opened with {} records", log.info().unwrap().records),
    }
}

fn corrupt_at(res: memcommit_core::Result<Arc<Log>>, what: &str) -> (u64, u64) {
    let (offset, lsn, _) = expect_corrupt(res, what);
    (offset, lsn)
}

#[test]
fn lsn_gaps_repeats_and_foreign_records_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let salt =
        FileHeader { version: format::FORMAT_VERSION, store_id: STORE, generation: 0, dense_from: 0 }.salt();

    // The control: 1, 2, 3 opens.
    let (good, _) = build_file(&[(R::Put(1, "a"), salt), (R::Put(2, "b"), salt), (R::Put(3, "c"), salt)]);
    let (_, res) = open_hand_built(dir.path(), "good.log", &good);
    let log = res.unwrap();
    assert_eq!((log.info().unwrap().records, log.lsn()), (3, 3));
    log.close().unwrap();

    // 1, 2, 4: a record is missing.
    let (b, offs) = build_file(&[(R::Put(1, "a"), salt), (R::Put(2, "b"), salt), (R::Put(4, "c"), salt)]);
    let (path, res) = open_hand_built(dir.path(), "gap.log", &b);
    let (offset, lsn, reason) = expect_corrupt(res, "1,2,4");
    assert_eq!((offset, lsn), (offs[2], 3), "{reason}");
    assert!(reason.contains("LSN 4"), "{reason}");
    assert_eq!(file_len(&path), b.len() as u64, "a refused open must not truncate");
    let err = writer(&path).err().unwrap().to_string();
    assert!(err.contains(&format!("byte offset {}", offs[2])) && err.contains("LSN 3"), "{err}");

    // 1, 2, 2, 3: a repeat with records of the log's future after it.
    let (b, offs) = build_file(&[
        (R::Put(1, "a"), salt),
        (R::Put(2, "b"), salt),
        (R::Put(2, "c"), salt),
        (R::Put(3, "d"), salt),
    ]);
    let (path, res) = open_hand_built(dir.path(), "repeat.log", &b);
    assert_eq!(corrupt_at(res, "1,2,2,3"), (offs[2], 3));
    assert_eq!(file_len(&path), b.len() as u64);
    // 1, 2, 2 with nothing after the repeat: stale bytes where LSN 3 belongs, no record of the
    // log's future after them, so a tail that was never acknowledged (T4's duplicated old
    // record). A writer cuts it.
    let (b, offs) = build_file(&[(R::Put(1, "a"), salt), (R::Put(2, "b"), salt), (R::Put(2, "c"), salt)]);
    let (path, res) = open_hand_built(dir.path(), "repeat-tail.log", &b);
    let log = res.unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.lsn), (2, 2));
    assert_eq!((file_len(&path), info.recovered_bytes), (offs[2], b.len() as u64 - offs[2]));
    assert!(!log.contains("c").unwrap());
    log.close().unwrap();
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.records), (None, 2));

    // A first record with LSN 2.
    let (b, offs) = build_file(&[(R::Put(2, "a"), salt), (R::Put(3, "b"), salt)]);
    let (_, res) = open_hand_built(dir.path(), "first2.log", &b);
    assert_eq!(corrupt_at(res, "first LSN 2"), (offs[0], 1));

    // A record of another store in the middle.
    let (b, offs) = build_file(&[(R::Put(1, "a"), salt), (R::Put(2, "b"), salt ^ 1), (R::Put(3, "c"), salt)]);
    let (path, res) = open_hand_built(dir.path(), "foreign.log", &b);
    let (offset, lsn, reason) = expect_corrupt(res, "foreign salt");
    assert_eq!((offset, lsn), (offs[1], 2), "{reason}");
    assert_eq!(file_len(&path), b.len() as u64);
    // The same foreign record at the very end is a stale tail, cut.
    let (b, offs) = build_file(&[(R::Put(1, "a"), salt), (R::Put(2, "b"), salt), (R::Put(3, "c"), salt ^ 1)]);
    let (path, res) = open_hand_built(dir.path(), "foreign-tail.log", &b);
    let log = res.unwrap();
    assert_eq!((log.info().unwrap().records, file_len(&path)), (2, offs[2]));
    log.close().unwrap();

    // A status record for an id never put.
    let (b, offs) =
        build_file(&[(R::Put(1, "a"), salt), (R::Status(2, "ghost"), salt), (R::Put(3, "c"), salt)]);
    let (_, res) = open_hand_built(dir.path(), "ghost.log", &b);
    let (offset, lsn, _) = expect_corrupt(res, "status of an unknown id");
    assert_eq!((offset, lsn), (offs[1], 2));
    // Even as the last record: it is whole and valid, so it is not a torn tail.
    let (b, offs) = build_file(&[(R::Put(1, "a"), salt), (R::Status(2, "ghost"), salt)]);
    let (_, res) = open_hand_built(dir.path(), "ghost-tail.log", &b);
    assert_eq!(corrupt_at(res, "status of an unknown id at the end"), (offs[1], 2));

    // A damaged header.
    let mut b = good.clone();
    b[20] ^= 0x10;
    let (_, res) = open_hand_built(dir.path(), "header.log", &b);
    assert_eq!(expect_corrupt(res, "header").0, 0);
    // A file shorter than a header.
    let (_, res) = open_hand_built(dir.path(), "short.log", &good[..30]);
    assert_eq!(expect_corrupt(res, "short header").0, 0);
}

// ---------------------------------------------------------------------------------------------
// Damage in committed data
// ---------------------------------------------------------------------------------------------

/// Damage followed only by records written while it was not yet durable (a power loss that
/// kept some of a drive's unsynced writes and not others) is a torn write: the writer's open
/// cuts it. Here nothing was fsynced before the close (`durability="none"`), so every record
/// says so; the close's own fsync is recorded in the lock file, and without it the damage is
/// cut.
#[test]
fn damage_that_no_fsync_covered_is_a_torn_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unsynced.log");
    let log = writer(&path).unwrap();
    for i in 0..10 {
        commit(&log, &[put(&format!("m{i}"), &format!("memory number {i}"))], T0 + i);
    }
    let third = log.get_many(&["m2"]).unwrap()[0].as_ref().unwrap().entry.put_off;
    let records = all_records(&log);
    log.close().unwrap();
    drop(log);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[third as usize + format::RECORD_HEADER_LEN + 12] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    // The close fsynced the log and said so in the lock file: the damage is in durable data.
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.damage_mid_log), (Some(third), true));
    expect_corrupt(writer(&path), "damage before a clean close's end");
    // Without that marker (the writer died before closing), nothing says the records were
    // ever durable, and the damage reads as a torn write.
    std::fs::remove_file(format::lock_path(&path)).unwrap();
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.damage_mid_log, ins.good_end), (Some(third), false, third));
    let log = writer(&path).unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.lsn), (2, 2));
    assert_eq!(info.recovered_bytes, bytes.len() as u64 - third);
    assert_eq!(all_records(&log), records[..2]);
}

#[test]
fn damage_mid_log_refuses_open_until_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mid.log");
    let log = Log::open(&path, opts(Durability::Commit)).unwrap();
    for i in 0..10 {
        commit(&log, &[put(&format!("m{i}"), &format!("memory number {i}"))], T0 + i);
    }
    let reads = log.get_many(&(0..10).map(|i| format!("m{i}")).collect::<Vec<_>>()).unwrap();
    let offs: Vec<u64> = reads.iter().map(|r| r.as_ref().unwrap().entry.put_off).collect();
    let records = all_records(&log);
    log.close().unwrap();
    drop(log);

    let mut bytes = std::fs::read(&path).unwrap();
    let third = offs[2];
    // A byte of the third record's payload (its text).
    let at = third as usize + format::RECORD_HEADER_LEN + 2 + 10;
    bytes[at] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();

    let (offset, lsn, _) = expect_corrupt(writer(&path), "payload byte of record 3");
    assert_eq!((offset, lsn), (third, 3));
    let (offset, lsn, _) = expect_corrupt(reader(&path), "reader, payload byte of record 3");
    assert_eq!((offset, lsn), (third, 3));
    assert_eq!(file_len(&path), bytes.len() as u64, "open must not cut committed data");

    let ins = inspect(&path).unwrap();
    assert!(ins.header_ok);
    assert_eq!(ins.damage_offset, Some(third));
    assert_eq!(ins.damage_lsn, Some(3));
    assert!(ins.damage_mid_log);
    assert_eq!(ins.good_end, third);
    assert_eq!((ins.records, ins.lsn, ins.bytes), (2, 2, bytes.len() as u64));
    assert!(ins.damage_reason.is_some());

    // truncate refuses while a writer holds the log (none does here), then cuts.
    truncate(&path, ins.good_end).unwrap();
    assert_eq!(file_len(&path), third);
    let log = writer(&path).unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.lsn, info.recovered_bytes), (2, 2, 0));
    assert_eq!(all_records(&log), records[..2]);
    assert_eq!(log.get_many(&["m2"]).unwrap()[0].as_ref().map(|r| r.entry.lsn), None);
    // It takes new commits from LSN 3.
    assert_eq!(commit(&log, &[put("m2", "again")], T0 + 100), (3, 3));
    // truncate refuses while the writer holds the lock.
    assert!(matches!(truncate(&path, HEADER_LEN as u64), Err(Error::Locked { .. })));
    log.close().unwrap();

    // inspect of a clean log and of a torn tail.
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.damage_mid_log, ins.records), (None, false, 3));
    let clean = file_len(&path);
    let mut f = std::fs::read(&path).unwrap();
    // Zeros after the last commit are space a writer wrote ahead, not damage.
    f.extend_from_slice(&[0u8; 100]);
    std::fs::write(&path, &f).unwrap();
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.damage_mid_log, ins.good_end), (None, false, clean));
    // Anything else there is a torn tail.
    f.extend_from_slice(&[0xABu8; 100]);
    std::fs::write(&path, &f).unwrap();
    let ins = inspect(&path).unwrap();
    assert_eq!((ins.damage_offset, ins.damage_mid_log, ins.good_end), (Some(clean), false, clean));
    assert!(truncate(&path, 10).is_err(), "cutting into the header is refused");
}

// ---------------------------------------------------------------------------------------------
// Readers and the writer lock
// ---------------------------------------------------------------------------------------------

#[test]
fn reader_catches_up_only_on_refresh_and_writers_exclude_each_other() {
    let (dir, path, w) = durable_log("rw.log");
    commit(&w, &[put("a", "1"), put("b", "2")], T0);
    let r = reader(&path).unwrap();
    assert_eq!(r.info().unwrap().records, 2);
    assert_eq!(r.chain_value().unwrap(), w.chain_value().unwrap(), "reader chain after open");
    assert!(matches!(r.commit(&[put("c", "3")], None, T0), Err(Error::ReadOnly { .. })));

    commit(&w, &[put("c", "3")], T0 + 1);
    commit(&w, &[put("d", "4"), Command::Move { id: "a".into(), tier: Tier::Long }], T0 + 2);
    // Not yet.
    assert_eq!((r.info().unwrap().records, r.lsn()), (2, 2));
    assert!(!r.contains("c").unwrap());
    assert!(r.get_many(&["d"]).unwrap()[0].is_none());
    assert_eq!(r.get_many(&["a"]).unwrap()[0].as_ref().unwrap().entry.tier, Tier::Working);
    // Now.
    assert_eq!(r.refresh().unwrap(), 3);
    assert_eq!((r.info().unwrap().records, r.lsn()), (5, 5));
    assert!(r.contains("c").unwrap() && r.contains("d").unwrap());
    assert_eq!(r.get_many(&["a"]).unwrap()[0].as_ref().unwrap().entry.tier, Tier::Long);
    assert_eq!(all_records(&r), all_records(&w));
    assert_eq!(r.chain_value().unwrap(), w.chain_value().unwrap(), "reader chain after refresh");
    assert_eq!(r.refresh().unwrap(), 0);

    // A second writer, in this process, is locked out.
    match Log::open(&path, opts(Durability::Commit)) {
        Err(Error::Locked { .. }) => {}
        other => panic!("second writer: {:?}", other.map(|_| ())),
    }
    // ... until the first closes.
    w.close().unwrap();
    assert!(matches!(w.commit(&[put("e", "5")], None, T0), Err(Error::Closed { .. })));
    let w2 = Log::open(&path, opts(Durability::Commit)).unwrap();
    assert_eq!(w2.info().unwrap().records, 5);
    commit(&w2, &[put("e", "5")], T0 + 3);
    assert_eq!(r.refresh().unwrap(), 1);
    assert_eq!(r.chain_value().unwrap(), w2.chain_value().unwrap());
    drop(w);
    w2.close().unwrap();

    // A reader of a file whose last commit never finished sees the whole commits only and
    // leaves the bytes alone; the next writer cuts them.
    let bytes = std::fs::read(&path).unwrap();
    let salt = FileHeader::decode(&bytes).unwrap().salt();
    let mut partial = Vec::new();
    encode_record(&mut partial, Op::Task, 0, 0, salt, 7, T0 + 4, b"t", |o| o.push(1));
    std::fs::write(&path, [&bytes[..], &partial[..]].concat()).unwrap();
    r.close().unwrap();
    let r = reader(&path).unwrap();
    assert_eq!((r.info().unwrap().records, r.is_task_finished("t").unwrap()), (6, false));
    assert_eq!(file_len(&path), (bytes.len() + partial.len()) as u64);
    let w3 = writer(&path).unwrap();
    assert_eq!(w3.info().unwrap().recovered_bytes, partial.len() as u64);
    assert_eq!(file_len(&path), bytes.len() as u64);
    w3.close().unwrap();
    // A reader cannot create a missing log.
    assert!(reader(&dir.path().join("missing.log")).is_err());
}

// ---------------------------------------------------------------------------------------------
// Group commit
// ---------------------------------------------------------------------------------------------

#[test]
fn group_commit_from_eight_threads() {
    const THREADS: u64 = 8;
    const EACH: u64 = 200;
    let (_dir, path, log) = durable_log("group.log");
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                (0..EACH)
                    .map(|i| {
                        let id = format!("t{t}-{i}");
                        let (first, last) = commit(&log, &[put(&id, "x")], T0 + (t * EACH + i) as i64);
                        assert_eq!(first, last);
                        (first, id)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, String)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    // Each thread saw its own LSNs rise.
    let lsns: HashSet<u64> = acked.iter().map(|(l, _)| *l).collect();
    assert_eq!(lsns.len() as u64, THREADS * EACH, "duplicate LSNs");
    assert_eq!(lsns, (1..=THREADS * EACH).collect());
    log.close().unwrap();
    drop(log);

    let log = writer(&path).unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.lsn, info.memories, info.recovered_bytes), (1600, 1600, 1600, 0));
    let recs = all_records(&log);
    assert_eq!(recs.iter().map(|r| lsn_of(r)).collect::<Vec<_>>(), (1..=1600).collect::<Vec<_>>());
    // The record with each acknowledged LSN is the put that was acknowledged with it.
    acked.sort();
    for ((lsn, id), rec) in acked.iter().zip(&recs) {
        assert_eq!((lsn_of(rec), key_of(rec)), (*lsn, id.as_str()));
    }
    log.close().unwrap();
}

/// Readers in the same process read memories while other threads commit: every memory a
/// reader can see reads back whole, whether its bytes are still in the write queue, being
/// written, or in the file (the appender serves each range from the right place).
#[test]
fn reads_during_group_commits_see_whole_records() {
    const WRITERS: u64 = 4;
    const EACH: u64 = 300;
    let (_dir, path, log) = durable_log("busy.log");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (log, done) = (log.clone(), done.clone());
            std::thread::spawn(move || {
                let mut checked = 0u64;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    for m in log.find(&Query::default()).unwrap().iter().rev().take(50) {
                        // One whole put record (read_puts checked its checksum), whose text
                        // names its id.
                        let body = memory::decode_put(payload_of(&m.put)).expect("a whole put record");
                        assert!(body.text.starts_with(key_of(&m.put)), "{} / {}", key_of(&m.put), body.text);
                        checked += 1;
                    }
                }
                checked
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let id = format!("w{t}-{i}");
                    let text = format!("{id} {}", "payload ".repeat((i % 40) as usize));
                    commit(&log, &[put(&id, &text)], T0);
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    done.store(true, std::sync::atomic::Ordering::Release);
    let checked: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(checked > 0, "the readers read nothing");
    assert_eq!(log.len().unwrap() as u64, WRITERS * EACH);
    log.close().unwrap();
    let log = writer(&path).unwrap();
    assert_eq!(log.info().unwrap().records, WRITERS * EACH);
}

/// A commit large enough to stream several chunks to the file, refused by its last guard:
/// nothing of it stays, in the index or the file, and the log takes the next commit.
#[test]
fn a_refused_large_commit_leaves_nothing_behind() {
    let (_dir, path, log) = durable_log("big.log");
    commit(&log, &[put("keep", "before")], T0);
    let bytes_before = log.info().unwrap().bytes;
    let mut cmds: Vec<Command> = (0..20_000).map(|i| put(&format!("big-{i}"), &"x".repeat(200))).collect();
    cmds.push(Command::Expect(Expect { id: "missing".into(), exists: Some(true), ..Default::default() }));
    match log.commit(&cmds, None, T0) {
        Err(Error::Rejected(r)) => assert_eq!(r.id.as_deref(), Some("missing")),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!((log.lsn(), log.len().unwrap()), (1, 1));
    assert!(!log.contains("big-0").unwrap() && !log.contains("big-19999").unwrap());
    assert_eq!(log.info().unwrap().bytes, bytes_before);
    let file = std::fs::read(&path).unwrap();
    assert!(
        file[bytes_before as usize..].iter().all(|&b| b == 0),
        "the streamed chunks were cut off: only zeros may follow the log"
    );
    commit(&log, &[put("after", "after the refusal")], T0);
    log.close().unwrap();
    let log = writer(&path).unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.lsn, info.memories, info.recovered_bytes), (2, 2, 2, 0));
    assert!(log.contains("after").unwrap() && !log.contains("big-5").unwrap());
}

/// While a writer is open its file ends in zeros written ahead of the next commits. A copy
/// taken then (what a crash leaves) opens with every commit; a reader treats the zeros as free
/// space and the next writer cuts them.
#[test]
fn zeros_written_ahead_are_free_space_until_the_writer_closes() {
    let (dir, path, log) = durable_log("live.log");
    for i in 0..20 {
        commit(&log, &[put(&format!("m{i}"), "a small commit")], T0 + i);
    }
    let end = log.info().unwrap().bytes;
    let live = std::fs::read(&path).unwrap();
    assert!(live.len() as u64 > end, "the writer keeps space ahead");
    assert!(live[end as usize..].iter().all(|&b| b == 0));
    // A reader beside the writer sees all 20 and no damage.
    let r = reader(&path).unwrap();
    assert_eq!((r.info().unwrap().records, r.info().unwrap().bytes), (20, end));
    assert_eq!(inspect(&path).unwrap().damage_offset, None);
    // A crash now: the copy opens with every commit and the zeros cut.
    let crashed = dir.path().join("crashed.log");
    std::fs::write(&crashed, &live).unwrap();
    let w = writer(&crashed).unwrap();
    let info = w.info().unwrap();
    assert_eq!((info.records, info.bytes, info.recovered_bytes), (20, end, live.len() as u64 - end));
    assert_eq!(file_len(&crashed), end);
    // Close cuts the zeros of the live writer too.
    log.close().unwrap();
    assert_eq!(file_len(&path), end);
}

#[test]
fn a_cut_expecting_a_length_refuses_a_file_that_changed_since_it_was_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.log");
    {
        let log = writer(&path).unwrap();
        log.commit(&[put("m1", "kept")], None, T0).unwrap();
        log.close().unwrap();
    }
    let good_end = std::fs::metadata(&path).unwrap().len();
    {
        let log = writer(&path).unwrap();
        log.commit(&[put("m2", "cut")], None, T0).unwrap();
        log.close().unwrap();
    }
    let inspected = std::fs::metadata(&path).unwrap().len();
    // Something appended after the look: the cut is refused and the file left as it is.
    std::io::Write::write_all(&mut std::fs::OpenOptions::new().append(true).open(&path).unwrap(), b"later")
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    match truncate_expecting(&path, good_end, inspected) {
        Err(Error::Invalid { field: "expect_len", .. }) => {}
        other => panic!("expected a refusal naming expect_len, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // At the length it was inspected at, it is cut.
    let inspected = before.len() as u64;
    truncate_expecting(&path, good_end, inspected).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_end);
}

/// Format version 2 records say how far behind them the durable end was; a writer appending
/// to a version 1 log keeps writing version 1 records (gap 0) and leaves its header as it was.
#[test]
fn records_carry_their_durable_gap_and_version_1_logs_stay_version_1() {
    let dir = tempfile::tempdir().unwrap();
    let gaps = |path: &Path| {
        let b = std::fs::read(path).unwrap();
        let h = FileHeader::decode(&b).unwrap();
        let mut out = Vec::new();
        let mut off = HEADER_LEN;
        while let Ok(r) = format::parse_record(&b[off..], h.salt(), format::MAX_PAYLOAD_LEN) {
            out.push((off as u64, r.durable_gap));
            off += r.bytes.len();
        }
        (h.version, out)
    };
    // Nothing fsynced (durability none): every record's gap is its distance from the header.
    let new = dir.path().join("v2.log");
    let log = writer(&new).unwrap();
    for i in 0..20 {
        commit(&log, &[put(&format!("m{i}"), &"x".repeat(100))], T0 + i);
    }
    log.close().unwrap();
    drop(log);
    let (version, recs) = gaps(&new);
    assert_eq!(version, format::FORMAT_VERSION);
    assert_eq!(recs.len(), 20);
    for (off, gap) in recs {
        assert_eq!(gap as u64, (off - HEADER_LEN as u64) / format::DURABLE_GAP_UNIT, "record at {off}");
    }
    // Each commit fsynced: the next one starts where the durable end is, a gap of 0.
    let durable = dir.path().join("durable.log");
    let log = Log::open(&durable, opts(Durability::Commit)).unwrap();
    for i in 0..5 {
        commit(&log, &[put(&format!("m{i}"), "y")], T0 + i);
    }
    drop(log);
    assert!(gaps(&durable).1.iter().all(|&(_, gap)| gap == 0));
    // A version 1 log.
    let old = dir.path().join("v1.log");
    let header = FileHeader { version: 1, store_id: STORE, generation: 0, dense_from: 0 };
    std::fs::write(&old, header.encode()).unwrap();
    let log = writer(&old).unwrap();
    for i in 0..20 {
        commit(&log, &[put(&format!("m{i}"), &"x".repeat(100))], T0 + i);
    }
    drop(log);
    let (version, recs) = gaps(&old);
    assert_eq!((version, recs.len()), (1, 20));
    assert!(recs.iter().all(|&(_, gap)| gap == 0));
}

/// Commit `commits` commits of 1,000 puts of 1,000-byte texts each (about 1 MB a commit).
fn commit_thousands(log: &Log, commits: usize) {
    let text = "t".repeat(1000);
    for c in 0..commits {
        let cmds: Vec<Command> = (0..1000).map(|i| put(&format!("m{c}-{i}"), &text)).collect();
        log.commit(&cmds, None, T0).unwrap();
    }
}

/// `open_between` calls its `between` while it replays a log with no index file, and an error
/// from it stops the open: nothing of the log changes, the lock is let go, and the next open
/// replays the whole log.
#[test]
fn an_error_between_replay_steps_stops_the_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.db");
    let no_index = Options { index_file_every: 0, ..opts(Durability::None) };
    {
        let log = Log::open(&path, no_index.clone()).unwrap();
        commit_thousands(&log, 20);
        log.close().unwrap();
    }
    assert!(!memcommit_core::index_file::path_for(&path).exists(), "the test needs a full replay");
    let before = std::fs::read(&path).unwrap();
    assert!(before.len() > 16 << 20, "several replay steps long");

    let mut calls = 0;
    let stopped = Log::open_between(&path, no_index.clone(), None, &mut || {
        calls += 1;
        Err(Error::Invalid { field: "interrupted", message: "stop here".into() })
    });
    assert!(matches!(stopped, Err(Error::Invalid { field: "interrupted", .. })));
    assert_eq!(calls, 1, "the first error ends the replay");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let mut steps = 0;
    let log = Log::open_between(&path, no_index, None, &mut || {
        steps += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(log.len().unwrap(), 20_000);
    assert!(steps >= 4, "called every few megabytes: {steps} calls for {} bytes", before.len());
}

/// `refresh_between` stops a reader's catch-up at the last whole commit when `between` fails:
/// the reader is behind, never inside a commit, and the next refresh goes on from there.
#[test]
fn an_error_between_refresh_steps_leaves_the_reader_at_a_whole_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("followed.db");
    let log = writer(&path).unwrap();
    log.commit(&[put("first", "before the reader")], None, T0).unwrap();
    let follower = reader(&path).unwrap();
    commit_thousands(&log, 20);

    let mut calls = 0;
    let stopped = follower.refresh_between(&mut || {
        calls += 1;
        if calls == 2 {
            Err(Error::Invalid { field: "interrupted", message: "stop here".into() })
        } else {
            Ok(())
        }
    });
    assert!(matches!(stopped, Err(Error::Invalid { field: "interrupted", .. })));
    // Some commits applied, none in part: the reader's LSN is one a commit ended on.
    let behind = follower.lsn();
    assert!(behind > 1 && behind < 20_001, "stopped part way: LSN {behind}");
    assert_eq!((behind - 1) % 1000, 0, "LSN {behind} is inside a commit of 1,000 records");
    assert_eq!(follower.len().unwrap() as u64, behind);

    assert_eq!(follower.refresh().unwrap(), 20_001 - behind);
    assert_eq!((follower.lsn(), follower.len().unwrap()), (20_001, 20_001));
}
