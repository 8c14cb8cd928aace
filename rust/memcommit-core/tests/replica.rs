//! Replicas: a RAM log fed another log's raw records agrees with it, and refuses bad bytes.

use memcommit_core::log::Log;
use memcommit_core::{Command, Durability, Error, Options, PutCommand, Status};

const T0: i64 = 1_700_000_000_000_000;

fn put(id: &str) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: "note".into(),
        text: format!("text of {id}"),
        ..PutCommand::default()
    })
}

#[test]
fn a_replica_fed_in_pieces_agrees_with_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    let owner =
        Log::open(&dir.path().join("o.log"), Options { durability: Durability::None, ..Options::default() })
            .unwrap();
    for i in 0..3000 {
        owner.commit(&[put(&format!("m{i}")), put(&format!("n{i}"))], None, T0 + i).unwrap();
    }
    owner
        .commit(
            &[Command::<String>::SetStatus { id: "m7".into(), status: Status::Stale, reason: None }],
            None,
            T0,
        )
        .unwrap();
    owner.write_entities(&[("lock\0job", Some(br#"{"token":1}"#))], T0).unwrap();
    owner.seal(None, T0).unwrap();

    let replica = Log::replica(&owner.header_bytes(), Options::default()).unwrap();
    let mut after = 0;
    loop {
        let (bytes, last) = owner.read_raw(after, 10_000).unwrap();
        if bytes.is_empty() {
            break;
        }
        assert_eq!(replica.apply_raw(&bytes).unwrap(), last);
        after = last;
    }
    assert_eq!(replica.lsn(), owner.lsn());
    let (o, r) = (owner.info().unwrap(), replica.info().unwrap());
    assert_eq!((o.records, o.memories, o.bytes), (r.records, r.memories, r.bytes));
    assert_eq!(replica.chain_value().unwrap(), owner.chain_value().unwrap());
    assert_eq!(replica.verify(None, None).unwrap().seals_checked, 1);
    let ids = ["m7", "n2999", "x"];
    let (a, b) = (owner.get_many(&ids).unwrap(), replica.get_many(&ids).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x.as_ref().map(|m| (&m.put, m.entry.status)),
            y.as_ref().map(|m| (&m.put, m.entry.status))
        );
    }
    assert_eq!(replica.entities().unwrap(), owner.entities().unwrap());
    // A replica takes no commits of its own.
    assert!(matches!(replica.commit(&[put("local")], None, T0), Err(Error::ReadOnly { .. })));
}

#[test]
fn bad_raw_bytes_apply_nothing() {
    let owner = Log::memory(Options::default()).unwrap();
    owner.commit(&[put("a"), put("b")], None, T0).unwrap();
    owner.commit(&[put("c")], None, T0).unwrap();
    let (bytes, _) = owner.read_raw(0, usize::MAX).unwrap();
    let replica = Log::replica(&owner.header_bytes(), Options::default()).unwrap();

    let mut flipped = bytes.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 1;
    assert!(matches!(replica.apply_raw(&flipped), Err(Error::Corrupt { lsn: 3, .. })));
    assert!(matches!(replica.apply_raw(&bytes[..bytes.len() - 5]), Err(Error::Corrupt { .. })));
    let (first_commit, _) = owner.read_raw(0, 1).unwrap();
    assert!(matches!(replica.apply_raw(&bytes[first_commit.len()..]), Err(Error::Corrupt { lsn: 1, .. })));
    assert_eq!((replica.lsn(), replica.len().unwrap()), (0, 0), "nothing applied");

    let other = Log::memory(Options::default()).unwrap();
    other.commit(&[put("z")], None, T0).unwrap();
    let (foreign, _) = other.read_raw(0, usize::MAX).unwrap();
    assert!(matches!(replica.apply_raw(&foreign), Err(Error::Corrupt { .. })), "another store's records");

    assert_eq!(replica.apply_raw(&bytes).unwrap(), 3);
    assert_eq!(replica.len().unwrap(), 3);
}

#[test]
fn a_replica_knows_the_time_of_the_newest_record_it_applied() {
    let owner = Log::memory(Options::default()).unwrap();
    owner.commit(&[put("a"), put("b")], None, T0 + 5).unwrap();
    owner.commit(&[put("c")], None, T0 + 9).unwrap();
    let replica = Log::replica(&owner.header_bytes(), Options::default()).unwrap();
    assert_eq!(replica.applied_at(), 0, "nothing applied yet");
    let (first, lsn) = owner.read_raw(0, 1).unwrap();
    replica.apply_raw(&first).unwrap();
    assert_eq!(replica.applied_at(), T0 + 5);
    let (rest, _) = owner.read_raw(lsn, usize::MAX).unwrap();
    replica.apply_raw(&rest).unwrap();
    assert_eq!(replica.applied_at(), T0 + 9);
    // Bytes refused apply nothing, the time included.
    assert!(replica.apply_raw(&rest).is_err());
    assert_eq!(replica.applied_at(), T0 + 9);
}

#[test]
fn the_bytes_since_a_ram_logs_end_are_the_commits_made_after_it() {
    let log = Log::memory(Options::default()).unwrap();
    log.commit(&[put("a")], None, T0).unwrap();
    let (end, lsn) = log.ram_end().unwrap();
    assert_eq!(lsn, log.lsn());
    assert!(log.raw_since(end).unwrap().is_empty());
    log.commit(&[put("b"), put("c")], None, T0).unwrap();
    log.commit(&[put("d")], None, T0).unwrap();
    let (want, _) = log.read_raw(lsn, usize::MAX).unwrap();
    assert_eq!(log.raw_since(end).unwrap(), want);
    // A refused commit leaves nothing behind it.
    let guard = Command::<String>::SetStatus { id: "nobody".into(), status: Status::Stale, reason: None };
    assert!(log.commit(&[put("e"), guard], None, T0).is_err());
    assert_eq!(log.raw_since(end).unwrap(), want);
    let (new_end, _) = log.ram_end().unwrap();
    assert!(matches!(log.raw_since(new_end + 1), Err(Error::Invalid { .. })));
    assert!(matches!(log.raw_since(3), Err(Error::Invalid { .. })));
    // A log in a file has its own ways to read: these are for a follower in RAM.
    let dir = tempfile::tempdir().unwrap();
    let file = Log::open(&dir.path().join("f.log"), Options::default()).unwrap();
    assert!(matches!(file.ram_end(), Err(Error::Invalid { .. })));
}

#[test]
fn a_read_up_to_an_lsn_stops_at_the_last_whole_commit_at_or_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let owner =
        Log::open(&dir.path().join("o.log"), Options { durability: Durability::None, ..Options::default() })
            .unwrap();
    // Commits of three records: LSNs 1-3, 4-6, 7-9, 10-12.
    for i in 0..4 {
        owner
            .commit(&[put(&format!("a{i}")), put(&format!("b{i}")), put(&format!("c{i}"))], None, T0)
            .unwrap();
    }
    let (all, last) = owner.read_raw(0, usize::MAX).unwrap();
    assert_eq!(last, 12);
    for (after, upto, want_last) in
        [(0, 6, 6), (0, 8, 6), (3, 9, 9), (3, 5, 3), (0, 2, 0), (6, 12, 12), (6, 100, 12)]
    {
        let (bytes, got_last) = owner.read_raw_upto(after, usize::MAX, upto).unwrap();
        assert_eq!(got_last, want_last, "after {after}, upto {upto}");
        // The bytes are the whole commits from `after` to `want_last`, as an unbounded read
        // gives them.
        let (whole, _) = owner.read_raw(after, usize::MAX).unwrap();
        let replica = Log::replica(&owner.header_bytes(), Options::default()).unwrap();
        if after > 0 {
            let (head, _) = owner.read_raw_upto(0, usize::MAX, after).unwrap();
            replica.apply_raw(&head).unwrap();
        }
        assert!(whole.starts_with(&bytes), "after {after}, upto {upto}");
        if !bytes.is_empty() {
            assert_eq!(replica.apply_raw(&bytes).unwrap(), want_last);
        }
        assert!(all.ends_with(&whole));
    }
    // Within the bound, `max_bytes` still cuts at a commit: one commit at least.
    let (one, one_last) = owner.read_raw_upto(0, 1, 9).unwrap();
    assert_eq!(one_last, 3);
    assert!(!one.is_empty());
}
