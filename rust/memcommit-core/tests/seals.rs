//! Seals: writing them by hand and automatically, and the checks that find any change to what
//! they cover.

use std::path::Path;

use memcommit_core::format::{self, FileHeader, HEADER_LEN};
use memcommit_core::log::AutoSeal;
use memcommit_core::seal::{self, SealEntry};
use memcommit_core::{Command, Durability, Error, Log, Options, PutCommand};

const T0: i64 = 1_700_000_000_000_000;

fn put(id: &str, text: &str) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: "note".into(),
        text: text.into(),
        ..PutCommand::default()
    })
}

fn opts() -> Options {
    Options { durability: Durability::None, ..Options::default() }
}

/// Every record of a log file: (offset, length).
fn records(bytes: &[u8]) -> Vec<(usize, usize)> {
    let salt = FileHeader::decode(bytes).unwrap().salt();
    let mut out = Vec::new();
    let mut off = HEADER_LEN;
    while off < bytes.len() {
        let r = format::parse_record(&bytes[off..], salt, format::MAX_PAYLOAD_LEN).unwrap();
        out.push((off, r.bytes.len()));
        off += r.bytes.len();
    }
    out
}

/// Recompute a record's checksum after changing it.
fn fix_crc(rec: &mut [u8]) {
    let n = rec.len() - 4;
    let crc = crc32c::crc32c(&rec[..n]);
    rec[n..].copy_from_slice(&crc.to_le_bytes());
}

fn write_log(path: &Path, n: usize, seal_every: usize) -> Vec<SealEntry> {
    let log = Log::open(path, opts()).unwrap();
    let mut seals = Vec::new();
    for i in 0..n {
        log.commit(&[put(&format!("m{i}"), &format!("text {i}"))], None, T0 + i as i64).unwrap();
        if (i + 1) % seal_every == 0 {
            seals.push(log.seal(None, T0 + i as i64).unwrap());
        }
    }
    log.close().unwrap();
    seals
}

#[test]
fn a_seal_covers_every_record_before_it_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.log");
    let seals = write_log(&path, 30, 10);
    assert_eq!(
        seals.iter().map(|s| (s.lsn, s.record_lsn)).collect::<Vec<_>>(),
        [(10, 11), (21, 22), (32, 33)]
    );
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.seals().unwrap(), seals);
    let done = log.verify(None, None).unwrap();
    assert_eq!((done.seals_checked, done.records), (3, 33));
    assert_eq!(done.value, log.chain_value().unwrap());
    let (newest, checked) = log.check_newest_seal(None).unwrap();
    assert_eq!(newest, seals[2]);
    // Only the records after what the seal before it covers: 22..=33.
    assert_eq!(checked.records, 12);
}

#[test]
fn auto_seal_seals_every_n_records_without_waiting_for_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    let log = Log::open(&path, opts()).unwrap();
    log.set_auto_seal(Some(AutoSeal { every: 100, key: None })).unwrap();
    for i in 0..1000 {
        log.commit(&[put(&format!("m{i}"), "x")], None, T0).unwrap();
    }
    let seals = log.seals().unwrap();
    assert!((9..=10).contains(&seals.len()), "{} seals", seals.len());
    for w in seals.windows(2) {
        assert_eq!(w[1].record_lsn - w[0].record_lsn, 101, "{w:?}");
        assert!(w[1].lsn > w[0].lsn);
        assert!(
            w[1].record_lsn - w[1].lsn <= seal::SEAL_WINDOW as u64,
            "a seal covers one of the SEAL_WINDOW commits before it"
        );
    }
    log.set_auto_seal(None).unwrap();
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.verify(None, None).unwrap().seals_checked, seals.len() as u64);
}

#[test]
fn any_changed_byte_in_a_sealed_range_fails_verify_even_with_its_checksum_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.log");
    write_log(&path, 12, 4);
    let good = std::fs::read(&path).unwrap();
    let recs = records(&good);
    for (i, &(off, len)) in recs.iter().enumerate() {
        // A byte of the payload (or of the key, for seals with no key).
        let at = off + len - 5;
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        fix_crc(&mut bad[off..off + len]);
        std::fs::write(&path, &bad).unwrap();
        let result =
            Log::open(&path, Options { read_only: true, ..opts() }).and_then(|l| l.verify(None, None));
        let last_seal_lsn = 15;
        let lsn = i as u64 + 1;
        match result {
            Err(Error::SealMismatch { lsn: seal_lsn, after_lsn, .. }) => {
                assert!(
                    seal_lsn >= lsn && after_lsn < lsn,
                    "record {lsn}: seal {seal_lsn}, after {after_lsn}"
                );
            }
            Err(Error::Corrupt { .. }) => {} // the change broke the payload itself
            other => assert!(lsn > last_seal_lsn, "record {lsn}: {other:?}"),
        }
    }
}

#[test]
fn a_keyed_seal_checks_only_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.log");
    let log = Log::open(&path, opts()).unwrap();
    log.commit(&[put("a", "x")], None, T0).unwrap();
    let key = seal::derive_key(b"secret");
    let s = log.seal(Some(&key), T0).unwrap();
    assert!(s.keyed && s.hash() == &seal::mac(&key, &s.chain, s.lsn));
    assert!(log.check_newest_seal(Some(&key)).is_ok());
    assert!(matches!(log.check_newest_seal(None), Err(Error::Invalid { field: "key", .. })));
    let other = seal::derive_key(b"other");
    assert!(matches!(log.check_newest_seal(Some(&other)), Err(Error::SealMismatch { lsn: 2, .. })));
    let unkeyed = log.verify(None, None).unwrap();
    assert_eq!((unkeyed.seals_checked, unkeyed.keyed_unchecked), (0, 1));
}

#[test]
fn a_log_in_ram_seals_and_verifies_too() {
    let log = Log::memory(opts()).unwrap();
    log.set_auto_seal(Some(AutoSeal { every: 3, key: None })).unwrap();
    for i in 0..10 {
        log.commit(&[put(&format!("m{i}"), "x")], None, T0).unwrap();
    }
    log.seal(None, T0).unwrap();
    let done = log.verify(None, None).unwrap();
    assert_eq!(done.seals_checked, log.seals().unwrap().len() as u64);
    assert!(done.seals_checked >= 4);
}

#[test]
fn a_source_that_never_existed_is_a_forged_reference() {
    let log = Log::memory(opts()).unwrap();
    log.commit(&[put("a", "x")], None, T0).unwrap();
    let derived: Command = Command::Put(PutCommand::<String> {
        id: "b".into(),
        kind: "summary".into(),
        text: "y".into(),
        sources: vec!["a".into(), "ghost".into()],
        ..PutCommand::default()
    });
    // The writer refuses such a source; only a log written trusting its sources (an import)
    // or altered holds one.
    assert!(matches!(log.commit(std::slice::from_ref(&derived), None, T0), Err(Error::Rejected(_))));
    log.trust_sources(true);
    log.commit(&[derived], None, T0).unwrap();
    match log.verify(None, None) {
        Err(Error::ForgedReference { id, by, lsn, .. }) => {
            assert_eq!((id.as_str(), by.as_str(), lsn), ("ghost", "b", 2))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_progress_callback_that_fails_stops_verify_at_once_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(&dir.path().join("m.log"), opts()).unwrap();
    // Several chunks of records, so verify reports progress more than once.
    let text = "x".repeat(64 << 10);
    for i in 0..200 {
        log.commit(&[put(&format!("m{i}"), &text)], None, T0).unwrap();
    }
    let mut calls = 0;
    let mut stop = |_done: u64| {
        calls += 1;
        Err(Error::Invalid { field: "interrupted", message: "stopped by the caller".into() })
    };
    match log.verify(None, Some(&mut stop)) {
        Err(Error::Invalid { field: "interrupted", .. }) => {}
        other => panic!("expected the callback's error, got {other:?}"),
    }
    assert_eq!(calls, 1, "verify went on after its callback said stop");
    let mut seen = 0;
    let mut count = |_done: u64| {
        seen += 1;
        Ok(())
    };
    log.verify(None, Some(&mut count)).unwrap();
    assert!(seen > 1, "a 12 MiB log is checked in more than one chunk");
}
