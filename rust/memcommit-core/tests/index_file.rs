//! The index file: opening from it gives the state a full replay gives; a file that does not
//! fit the log, or is damaged anywhere, is ignored and the log replayed; a writer saves one at
//! close once the log has grown enough.

mod common;

use common::{assert_same, opts, view, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::index_file::{path_for, IndexFileStatus};
use memcommit_core::{Command, Log, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `common::fill`, with rewrites of some memories (a new kind, no task or tags) and a second
/// entity.
fn fill(log: &Log, from: usize, to: usize) {
    common::fill(log, from, to);
    for i in (from..to).filter(|i| i % 11 == 0) {
        let mut p = common::put(&format!("m{i}"), None, &[]);
        if let Command::Put(p) = &mut p {
            p.kind = "trace".into();
        }
        log.commit(&[p], None, T0 + 1).unwrap();
    }
    log.write_entities(&[(&format!("run\0r{from}"), Some(b"{\"n\":1}"))], T0).unwrap();
}

/// A writer on a new log of `n` memories (`fill`) and a seal, with an index file written.
fn indexed(n: usize) -> (tempfile::TempDir, PathBuf, Arc<Log>) {
    let (dir, path, log) = common::new_log();
    fill(&log, 0, n);
    log.seal(None, T0).unwrap();
    log.write_index_file().unwrap();
    (dir, path, log)
}

/// The view and chain value of the log after a full replay (the index file moved aside).
fn replayed(path: &Path, upto: usize) -> (Vec<String>, [u8; 32]) {
    let idx = path_for(path);
    let aside = idx.with_extension("aside");
    let had = std::fs::rename(&idx, &aside).is_ok();
    let log = Log::open(path, opts()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Absent);
    let v = (view(&log, upto), log.chain_value().unwrap());
    log.close().unwrap();
    if had {
        std::fs::rename(&aside, &idx).unwrap();
    }
    v
}

#[test]
fn opening_from_the_index_file_gives_the_state_of_a_full_replay() {
    let (_dir, path, log) = indexed(300);
    // Records after the index file: replayed on open.
    fill(&log, 300, 340);
    log.close().unwrap();

    let (want, chain) = replayed(&path, 340);
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_same(&view(&log, 340), &want);
    assert_eq!(log.chain_value().unwrap(), chain, "the chain continues from the index file's");
    // It keeps working: commits to old and new ids, seals, verify. The index is used where it
    // was mapped from the file: changes stay in this process, never reach the file.
    let on_disk = std::fs::read(path_for(&path)).unwrap();
    fill(&log, 330, 360);
    log.seal(None, T0).unwrap();
    assert_eq!(log.verify(None, None).unwrap().seals_checked, 2);
    assert_eq!(std::fs::read(path_for(&path)).unwrap(), on_disk, "a change reached the index file");
    // Growing past the room the mapping keeps moves the index to the heap, whole.
    fill(&log, 360, 1200);
    assert_eq!(std::fs::read(path_for(&path)).unwrap(), on_disk);
    let live = view(&log, 1200);
    log.close().unwrap();
    let (want, _) = replayed(&path, 1200);
    assert_same(&live, &want);
    let reader = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    assert_eq!(reader.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_same(&view(&reader, 1200), &want);
}

#[test]
fn an_empty_log_and_an_unsorted_index_round_trip() {
    let (_dir, path, log) = common::new_log();
    log.write_index_file().unwrap();
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_eq!(log.len().unwrap(), 0);
    fill(&log, 0, 60);
    log.close().unwrap();

    // Compaction keeps a memory's last put, so creation order and log order differ: the index
    // kept then is out of creation order until the next open sorts it.
    let log = Log::open(&path, opts()).unwrap();
    let (_, log) = log.compact(None, &Retention::default(), T0, &mut Quiet).unwrap();
    fill(&log, 60, 80);
    log.write_index_file().unwrap();
    log.close().unwrap();
    let (want, _) = replayed(&path, 80);
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_same(&view(&log, 80), &want);
}

fn ignored(path: &Path) -> String {
    let log = Log::open(path, opts()).unwrap();
    let status = log.info().unwrap().index_file;
    log.close().unwrap();
    match status {
        IndexFileStatus::Ignored(why) => why,
        other => panic!("the index file was not ignored: {other:?}"),
    }
}

#[test]
fn damage_anywhere_in_the_index_file_is_caught_and_the_log_replayed() {
    let (_dir, path, log) = indexed(120);
    log.close().unwrap();
    let (want, _) = replayed(&path, 120);
    let idx = path_for(&path);
    let good = std::fs::read(&idx).unwrap();
    // Every byte of the header and the small sections, and a spread over the large ones.
    let step = (good.len() / 1500).max(1);
    let positions: Vec<usize> = (0..256)
        .chain((256..good.len()).step_by(step))
        .chain(good.len().saturating_sub(300)..good.len())
        .collect();
    for &at in &positions {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&idx, &bad).unwrap();
        let log = Log::open(&path, opts()).unwrap();
        assert!(
            matches!(log.info().unwrap().index_file, IndexFileStatus::Ignored(_)),
            "a flip at byte {at} went unnoticed"
        );
        assert_same(&view(&log, 120), &want);
        log.close().unwrap();
    }
    // Cut short anywhere, or grown.
    for len in [0, 10, 255, 256, 1000, good.len() / 2, good.len() - 1] {
        std::fs::write(&idx, &good[..len]).unwrap();
        ignored(&path);
    }
    let mut longer = good.clone();
    longer.push(0);
    std::fs::write(&idx, &longer).unwrap();
    assert!(ignored(&path).contains("do not add up"));
    std::fs::write(&idx, &good).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
}

#[test]
fn an_index_file_that_does_not_fit_the_log_is_ignored() {
    let (dir, path, log) = common::new_log();
    fill(&log, 0, 50);
    log.write_index_file().unwrap();
    log.close().unwrap();
    let idx = path_for(&path);
    let good_log = std::fs::read(&path).unwrap();
    let good_idx = std::fs::read(&idx).unwrap();

    // The log cut short (`memcommit repair`, or a file restored from an older backup).
    std::fs::write(&path, &good_log[..good_log.len() - 10]).unwrap();
    assert!(ignored(&path).contains("reaches byte"));

    // The log rewritten from the same point with another last record: same length and store.
    let mut other = good_log.clone();
    let n = other.len();
    other[n - 5] ^= 0xff;
    std::fs::write(&path, &other).unwrap();
    std::fs::write(&idx, &good_idx).unwrap();
    let log = Log::open(&path, Options { read_only: true, ..opts() });
    // The damaged record is the torn tail of the replay; what matters is the index file
    // was not believed.
    if let Ok(log) = log {
        assert!(matches!(log.info().unwrap().index_file, IndexFileStatus::Ignored(_)));
    }

    // Another store's index file.
    std::fs::write(&path, &good_log).unwrap();
    let other_path = dir.path().join("o.log");
    let other = Log::open(&other_path, opts()).unwrap();
    fill(&other, 0, 50);
    other.write_index_file().unwrap();
    other.close().unwrap();
    std::fs::copy(path_for(&other_path), &idx).unwrap();
    assert!(ignored(&path).contains("another store"));

    // After log compaction: another generation.
    std::fs::write(&idx, &good_idx).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    let (_, log) = log.compact(None, &Retention::default(), T0, &mut Quiet).unwrap();
    log.close().unwrap();
    std::fs::write(&idx, &good_idx).unwrap();
    let reader = Log::open(&path, Options { read_only: true, ..opts() }).unwrap();
    match reader.info().unwrap().index_file {
        IndexFileStatus::Ignored(why) => assert!(why.contains("generation"), "{why}"),
        other => panic!("{other:?}"),
    }
    drop(reader);
    assert!(idx.exists(), "a reader removed the index file");
    assert!(ignored(&path).contains("generation"));
    assert!(!idx.exists(), "the writer kept an index file that does not fit");
}

#[test]
fn a_writer_saves_the_index_file_at_close_once_the_log_has_grown_enough() {
    let every = Options { index_file_every: 100, ..opts() };
    let (dir, path, log) = common::new_log_with(every.clone());
    fill(&log, 0, 20); // fewer than 100 records
    log.close().unwrap();
    assert!(!path_for(&path).exists(), "written before the log grew by 100 records");

    let log = Log::open(&path, every.clone()).unwrap();
    fill(&log, 20, 120);
    log.close().unwrap();
    assert!(path_for(&path).exists());
    let stamp = std::fs::read(path_for(&path)).unwrap();

    // Opened from it, a few records more: not rewritten; many more: rewritten.
    let log = Log::open(&path, every.clone()).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    fill(&log, 120, 125);
    log.close().unwrap();
    assert_eq!(std::fs::read(path_for(&path)).unwrap(), stamp);
    let log = Log::open(&path, every.clone()).unwrap();
    fill(&log, 125, 200);
    log.close().unwrap();
    assert_ne!(std::fs::read(path_for(&path)).unwrap(), stamp);
    let (want, _) = replayed(&path, 200);
    let log = Log::open(&path, every).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_same(&view(&log, 200), &want);
    log.close().unwrap();

    // A reader never writes one.
    std::fs::remove_file(path_for(&path)).unwrap();
    let ro = Log::open(&path, Options { read_only: true, index_file_every: 1, ..opts() }).unwrap();
    ro.close().unwrap();
    assert!(!path_for(&path).exists());
    // No temp files left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
}

#[test]
fn log_compaction_writes_no_index_file_for_the_generation_it_replaces() {
    let every = Options { index_file_every: 1, ..opts() };
    let (_dir, path, log) = common::new_log_with(every.clone());
    fill(&log, 0, 50);
    let (_, log) = log.compact(None, &Retention::default(), T0, &mut Quiet).unwrap();
    // The old generation closed before the new one opened: it left no index file behind.
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Absent);
    fill(&log, 50, 60);
    log.close().unwrap();
    let log = Log::open(&path, every).unwrap();
    assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
    assert_eq!(log.info().unwrap().generation, 1);
}
