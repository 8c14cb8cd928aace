//! The hash chain's rule, computed here from the bytes of a log file alone and compared with
//! what the engine writes into seals and what `verify` accepts: one link per commit from
//! format version 3 (the compacted records one unit), one per record in versions 1 and 2.

mod common;

use std::path::Path;

use common::{opts, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::format::{self, FileHeader, FLAG_COMMIT_END, HEADER_LEN};
use memcommit_core::{Command, Error, Log, PutCommand};

fn put(id: &str, text: &str) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: "note".into(),
        text: text.into(),
        ..PutCommand::default()
    })
}

fn puts(from: usize, n: usize, text_len: usize) -> Vec<Command> {
    (from..from + n).map(|i| put(&format!("m{i}"), &format!("{i:08} {}", "x".repeat(text_len)))).collect()
}

fn blake3(b: &[u8]) -> [u8; 32] {
    *blake3::hash(b).as_bytes()
}

fn link(prev: &[u8; 32], digest: &[u8; 32]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(prev);
    block[32..].copy_from_slice(digest);
    blake3(&block)
}

/// Every record of a log file: (offset, bytes). A writer's file may end in zeros it filled
/// ahead of its commits.
fn records(file: &[u8]) -> Vec<(usize, &[u8])> {
    let salt = FileHeader::decode(file).unwrap().salt();
    let mut out = Vec::new();
    let mut off = HEADER_LEN;
    while off < file.len() && file[off..].iter().any(|&b| b != 0) {
        let r = format::parse_record(&file[off..], salt, format::MAX_PAYLOAD_LEN).unwrap();
        out.push((off, r.bytes));
        off += r.bytes.len();
    }
    out
}

/// The chain of a log file by the rule of its version, written out plainly: the value at the
/// end of every commit, by its last LSN, and the value at the end.
fn chain_by_the_rule(file: &[u8]) -> (Vec<(u64, [u8; 32])>, [u8; 32]) {
    let h = FileHeader::decode(file).unwrap();
    let mut value = blake3(&file[..HEADER_LEN]);
    let mut ends = Vec::new();
    let mut unit: Vec<u8> = Vec::new();
    let mut compacted: Option<u64> = None;
    for (_, rec) in records(file) {
        let lsn = u64::from_le_bytes(rec[8..16].try_into().unwrap());
        let commit_end = rec[3] & FLAG_COMMIT_END != 0;
        if h.version < 3 {
            value = link(&value, &blake3(rec));
            if commit_end || lsn <= h.dense_from {
                ends.push((lsn, value));
            }
            continue;
        }
        if lsn <= h.dense_from {
            unit.extend_from_slice(rec);
            compacted = Some(lsn);
            continue;
        }
        if let Some(last) = compacted.take() {
            value = link(&value, &blake3(&unit));
            unit.clear();
            ends.push((last, value));
        }
        unit.extend_from_slice(rec);
        if commit_end {
            value = link(&value, &blake3(&unit));
            unit.clear();
            ends.push((lsn, value));
        }
    }
    if let Some(last) = compacted {
        value = link(&value, &blake3(&unit));
        ends.push((last, value));
    }
    (ends, value)
}

/// Every seal of the log agrees with the rule, and the chain the engine reports is the rule's.
fn assert_follows_the_rule(path: &Path, log: &Log) {
    let file = std::fs::read(path).unwrap();
    let (ends, value) = chain_by_the_rule(&file);
    assert_eq!(log.chain_value().unwrap(), value, "the chain at the end");
    let seals = log.seals().unwrap();
    assert!(!seals.is_empty());
    for s in seals {
        let at = ends.iter().find(|(l, _)| *l == s.lsn).expect("a seal covers a commit end");
        assert_eq!(at.1, s.chain, "the seal at LSN {} covering LSN {}", s.record_lsn, s.lsn);
    }
    let checked = log.verify(None, None).unwrap();
    assert_eq!(checked.value, value);
    let recs = records(&file);
    let (last_off, last) = recs.last().unwrap();
    assert_eq!(checked.bytes as usize, last_off + last.len() - HEADER_LEN);
}

/// Commits of one record, of a few, of more than one 64 KiB piece, and one larger than the
/// 8 MiB verify reads at a time, each sealed.
fn write_mixed(log: &Log) {
    let mut n = 0;
    let mut at = T0;
    for (count, text_len) in [(1, 10), (3, 50), (1, 70_000), (700, 120), (2, 10), (60_000, 150), (1, 5)] {
        log.commit(&puts(n, count, text_len), None, at).unwrap();
        n += count;
        at += 1;
        log.seal(None, at).unwrap();
    }
}

#[test]
fn a_version_3_chain_links_each_commit_over_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.log");
    let log = Log::open(&path, opts()).unwrap();
    write_mixed(&log);
    log.close().unwrap();
    let file = std::fs::read(&path).unwrap();
    // A new log is of the current version, which chains as version 3 does.
    assert_eq!(FileHeader::decode(&file).unwrap().version, memcommit_core::format::FORMAT_VERSION);
    assert!(file.len() > 9 << 20, "one commit spans more than one read of verify");
    let log = Log::open(&path, opts()).unwrap();
    assert_follows_the_rule(&path, &log);
    let (newest, _) = log.check_newest_seal(None).unwrap();
    assert_eq!(newest, *log.seals().unwrap().last().unwrap());
}

#[test]
fn a_compacted_log_chains_its_kept_records_as_one_unit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.log");
    let log = Log::open(&path, opts()).unwrap();
    write_mixed(&log);
    // Replace half the memories, so compaction drops records.
    log.commit(&puts(0, 30_000, 20), None, T0 + 100).unwrap();
    let (report, log) = log.compact(None, &Retention::default(), T0 + 200, &mut Quiet).unwrap();
    assert!(report.plan.after < report.plan.before);
    let h = FileHeader::decode(&std::fs::read(&path).unwrap()).unwrap();
    assert!(h.dense_from > 0);
    assert_follows_the_rule(&path, &log);
    // Commits after it link one by one again.
    log.commit(&puts(100_000, 5, 10), None, T0 + 300).unwrap();
    log.commit(&puts(100_005, 1, 10), None, T0 + 301).unwrap();
    log.seal(None, T0 + 302).unwrap();
    assert_follows_the_rule(&path, &log);
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_follows_the_rule(&path, &log);
}

#[test]
fn a_log_in_ram_follows_the_same_rule() {
    let ram = Log::memory(opts()).unwrap();
    ram.commit(&puts(0, 2_000, 100), None, T0).unwrap();
    ram.commit(&puts(2_000, 1, 100), None, T0 + 1).unwrap();
    let seal = ram.seal(None, T0 + 2).unwrap();
    ram.commit(&puts(2_001, 3, 100), None, T0 + 3).unwrap();
    // Its bytes: the header and every record.
    let mut file = ram.header_bytes().to_vec();
    let (recs, _) = ram.read_records(0, 0, usize::MAX).unwrap();
    for r in recs {
        file.extend_from_slice(&r);
    }
    let (ends, value) = chain_by_the_rule(&file);
    assert_eq!(ram.chain_value().unwrap(), value);
    assert_eq!(ends.iter().find(|(l, _)| *l == seal.lsn).unwrap().1, seal.chain);
    assert_eq!(ram.verify(None, None).unwrap().value, value);
}

#[test]
fn a_changed_byte_in_a_large_commit_fails_verify_and_names_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.log");
    let log = Log::open(&path, opts()).unwrap();
    log.commit(&puts(0, 10, 10), None, T0).unwrap();
    let first = log.seal(None, T0 + 1).unwrap();
    log.commit(&puts(10, 50_000, 150), None, T0 + 2).unwrap();
    let second = log.seal(None, T0 + 3).unwrap();
    log.close().unwrap();
    let clean = std::fs::read(&path).unwrap();
    // Records deep inside the large commit: one piece in, and past the first 8 MiB read.
    let recs = records(&clean);
    for pick in [200, 40_000] {
        let (off, len) = (recs[pick].0, recs[pick].1.len());
        let mut bytes = clean.clone();
        bytes[off + 40] ^= 1;
        // The checksum left as it was, changed under a store opened before: verify names the
        // record (as replay does at the next open).
        std::fs::write(&path, &clean).unwrap();
        let reader = Log::open(&path, memcommit_core::Options { read_only: true, ..opts() }).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        match reader.verify(None, None) {
            Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, off as u64, "record {pick}"),
            other => panic!("expected the damaged record named, got {other:?}"),
        }
        drop(reader);
        match Log::open(&path, memcommit_core::Options { read_only: true, ..opts() }) {
            Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, off as u64, "record {pick}"),
            other => panic!("expected open to name the damaged record, got {:?}", other.map(|_| ())),
        }
        // The checksum recomputed: the chain catches it, at the seal after it.
        let n = off + len - 4;
        let crc = crc32c::crc32c(&bytes[off..n]);
        bytes[n..n + 4].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let log = Log::open(&path, opts()).unwrap();
        match log.verify(None, None) {
            Err(Error::SealMismatch { lsn, after_lsn, .. }) => {
                assert_eq!((lsn, after_lsn), (second.record_lsn, first.lsn), "record {pick}")
            }
            other => panic!("expected a seal mismatch, got {other:?}"),
        }
        match log.check_newest_seal(None) {
            Err(Error::SealMismatch { lsn, .. }) => assert_eq!(lsn, second.record_lsn),
            other => panic!("expected the newest seal to fail, got {other:?}"),
        }
        log.close().unwrap();
    }
}

#[test]
fn a_version_2_log_keeps_its_per_record_chain_until_compaction_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.log");
    let header = FileHeader { version: 2, store_id: [9; 16], generation: 0, dense_from: 0 };
    std::fs::write(&path, header.encode()).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    write_mixed(&log);
    log.close().unwrap();
    let file = std::fs::read(&path).unwrap();
    assert_eq!(FileHeader::decode(&file).unwrap().version, 2, "appending keeps the version");
    let log = Log::open(&path, opts()).unwrap();
    assert_follows_the_rule(&path, &log);
    // Per record, not per commit: the two rules differ on a commit of several records.
    let (v2_ends, _) = chain_by_the_rule(&file);
    let mut as_v3 = file.clone();
    as_v3[..HEADER_LEN].copy_from_slice(&FileHeader { version: 3, ..header }.encode());
    let (v3_ends, _) = chain_by_the_rule(&as_v3);
    assert_ne!(v2_ends.last(), v3_ends.last());
    let (_, log) = log.compact(None, &Retention::default(), T0 + 500, &mut Quiet).unwrap();
    assert_eq!(
        FileHeader::decode(&std::fs::read(&path).unwrap()).unwrap().version,
        memcommit_core::format::FORMAT_VERSION
    );
    assert_follows_the_rule(&path, &log);
}

/// Damage `record` of the log at `path` under a reader opened before it, and return what
/// verify says (the reader's replay saw the bytes intact).
/// Also returns the damaged record's offset and LSN, which verify must name.
fn verify_after_damage(path: &Path, clean: &[u8], record: usize) -> ((u64, u64), Result<(), Error>) {
    std::fs::write(path, clean).unwrap();
    let reader = Log::open(path, memcommit_core::Options { read_only: true, ..opts() }).unwrap();
    let (off, rec) = records(clean)[record];
    let lsn = u64::from_le_bytes(rec[8..16].try_into().unwrap());
    let mut bytes = clean.to_vec();
    bytes[off + 40] ^= 1;
    std::fs::write(path, &bytes).unwrap();
    ((off as u64, lsn), reader.verify(None, None).map(|_| ()))
}

#[test]
fn checksums_are_checked_wherever_no_seal_vouches_for_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.log");
    let log = Log::open(&path, opts()).unwrap();
    // About 45 MiB in commits of 1,000 records, no seal: more than verify lets wait unchecked.
    for c in 0..200 {
        log.commit(&puts(c * 1_000, 1_000, 200), None, T0 + c as i64).unwrap();
    }
    log.close().unwrap();
    let unsealed = std::fs::read(&path).unwrap();
    let n = records(&unsealed).len();
    for record in [5, n / 2, n - 1] {
        match verify_after_damage(&path, &unsealed, record) {
            (named, Err(Error::Corrupt { offset, lsn, .. })) => {
                assert_eq!((offset, lsn), named, "record {record} of {n}")
            }
            (_, other) => panic!("record {record}: expected the damaged record named, got {other:?}"),
        }
    }
    // Sealed in the middle: damage after the seal is still named, before it the seal fails
    // only when the checksum was recomputed, else the record is named.
    std::fs::write(&path, &unsealed).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    let seal = log.seal(None, T0 + 1_000).unwrap();
    log.commit(&puts(500_000, 2_000, 200), None, T0 + 1_001).unwrap();
    log.close().unwrap();
    let sealed = std::fs::read(&path).unwrap();
    let recs = records(&sealed);
    let after_seal = recs.iter().position(|(o, _)| *o as u64 > seal.offset).unwrap() + 10;
    for record in [3, n / 2, after_seal, recs.len() - 1] {
        match verify_after_damage(&path, &sealed, record) {
            (named, Err(Error::Corrupt { offset, lsn, .. })) => {
                assert_eq!((offset, lsn), named, "record {record}")
            }
            (_, other) => panic!("record {record}: expected the damaged record named, got {other:?}"),
        }
    }
    std::fs::write(&path, &sealed).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_follows_the_rule(&path, &log);
}
