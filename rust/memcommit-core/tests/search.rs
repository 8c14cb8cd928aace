//! Search on an open log: vectors in put records, the search index kept up with commits,
//! readers, compaction and a commit taken back, and the format version that may hold vectors.

mod common;

use std::sync::Arc;

use common::{opts, Quiet, T0};
use memcommit_core::compact::Retention;
use memcommit_core::format::FileHeader;
use memcommit_core::search::Mode;
use memcommit_core::{Command, Error, Expect, Log, PutCommand, Query, SearchQuery, Status};

fn vput(id: &str, text: &str, v: &[f32]) -> Command {
    Command::Put(PutCommand {
        id: id.into(),
        kind: "note".into(),
        text: text.into(),
        vector: Some(Arc::from(v)),
        ..Default::default()
    })
}

fn search(
    log: &Log,
    mode: Mode,
    text: Option<&str>,
    vector: Option<&[f32]>,
    filter: Query<'_>,
) -> Vec<String> {
    let q = SearchQuery { mode, text, vector, k: 10, filter };
    log.search(&q)
        .unwrap()
        .into_iter()
        .map(|(m, _)| memcommit_core::format::view_trusted(&m.put).key_str().to_string())
        .collect()
}

fn active() -> Query<'static> {
    Query { status: Some(Status::Active), ..Default::default() }
}

#[test]
fn a_commit_taken_back_leaves_the_search_index_as_committed() {
    let (_dir, _path, log) = common::new_log();
    log.commit(&[vput("a", "alpha words", &[1.0, 0.0])], None, T0).unwrap();
    // The first vector of this commit builds the search index inside the commit; a guard
    // after it fails, so the commit is taken back.
    let refused = log.commit(
        &[
            vput("a", "replaced words", &[0.0, 1.0]),
            vput("b", "beta words", &[0.0, 1.0]),
            Command::Expect(Expect { id: "zzz".into(), exists: Some(true), ..Default::default() }),
        ],
        None,
        T0 + 1,
    );
    assert!(matches!(refused, Err(Error::Rejected(_))), "{refused:?}");
    assert_eq!(search(&log, Mode::Vector, None, Some(&[0.0, 1.0]), active()), ["a"]);
    assert_eq!(search(&log, Mode::Text, Some("alpha"), None, active()), ["a"]);
    assert!(search(&log, Mode::Text, Some("replaced beta"), None, active()).is_empty());
    // And the next commit is found.
    log.commit(&[vput("b", "beta words", &[0.0, 1.0])], None, T0 + 2).unwrap();
    assert_eq!(search(&log, Mode::Vector, None, Some(&[0.0, 1.0]), active()), ["b", "a"]);
}

#[test]
fn the_dimension_is_checked_against_committed_vectors_and_the_commit_so_far() {
    let (_dir, _path, log) = common::new_log();
    let err = log.commit(&[vput("a", "x", &[1.0, 0.0]), vput("b", "y", &[1.0, 0.0, 0.0])], None, T0);
    match err {
        Err(Error::Invalid { field, message }) => {
            assert_eq!(field, "vector");
            assert!(message.contains("\"b\"") && message.contains("have 2"), "{message}");
        }
        other => panic!("expected an invalid vector, got {other:?}"),
    }
    assert_eq!(log.lsn(), 0);
    assert_eq!(log.vector_dims().unwrap(), None);
    log.commit(&[vput("a", "x", &[1.0, 0.0, 0.0])], None, T0).unwrap();
    assert_eq!(log.vector_dims().unwrap(), Some(3));
    assert!(log.commit(&[vput("b", "y", &[1.0, 0.0])], None, T0).is_err());
}

#[test]
fn a_reader_and_a_reopened_log_search_what_the_writer_committed() {
    let (_dir, path, log) = common::new_log();
    let reader = Log::open(&path, memcommit_core::Options { read_only: true, ..opts() }).unwrap();
    log.commit(&[vput("a", "first", &[1.0, 0.0]), vput("b", "second", &[0.0, 1.0])], None, T0).unwrap();
    reader.refresh().unwrap();
    assert_eq!(search(&reader, Mode::Vector, None, Some(&[1.0, 0.1]), active()), ["a", "b"]);
    log.commit(
        &[Command::<String>::SetStatus { id: "a".into(), status: Status::Stale, reason: None }],
        None,
        T0,
    )
    .unwrap();
    reader.refresh().unwrap();
    assert_eq!(search(&reader, Mode::Vector, None, Some(&[1.0, 0.1]), active()), ["b"]);
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(search(&log, Mode::Hybrid, Some("second"), Some(&[1.0, 0.1]), Query::default()), ["b", "a"]);
}

#[test]
fn an_older_log_refuses_vectors_until_compaction_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.log");
    let header = FileHeader { version: 3, store_id: [5; 16], generation: 0, dense_from: 0 };
    std::fs::write(&path, header.encode()).unwrap();
    let log = Log::open(&path, opts()).unwrap();
    log.commit(
        &[Command::Put(PutCommand::<String> {
            id: "a".into(),
            kind: "note".into(),
            text: "plain".into(),
            ..Default::default()
        })],
        None,
        T0,
    )
    .unwrap();
    match log.commit(&[vput("b", "x", &[1.0])], None, T0) {
        Err(Error::Invalid { field, message }) => {
            assert_eq!(field, "vector");
            assert!(
                message.contains("format version 3") && message.contains("memcommit compact"),
                "{message}"
            );
        }
        other => panic!("expected the vector refused, got {other:?}"),
    }
    let (_, log) = log.compact(None, &Retention::default(), T0 + 10, &mut Quiet).unwrap();
    log.commit(&[vput("b", "x", &[1.0])], None, T0 + 20).unwrap();
    assert_eq!(search(&log, Mode::Vector, None, Some(&[1.0]), active()), ["b"]);
}

#[test]
fn compaction_keeps_each_memory_s_last_vector() {
    let (_dir, _path, log) = common::new_log();
    log.commit(&[vput("a", "old text", &[1.0, 0.0])], None, T0).unwrap();
    log.commit(&[vput("a", "new text", &[0.0, 1.0])], None, T0 + 1).unwrap();
    log.commit(&[vput("b", "other", &[1.0, 0.0])], None, T0 + 2).unwrap();
    let (_, log) = log.compact(None, &Retention::default(), T0 + 10, &mut Quiet).unwrap();
    assert_eq!(search(&log, Mode::Vector, None, Some(&[0.0, 1.0]), active()), ["a", "b"]);
    assert!(search(&log, Mode::Text, Some("old"), None, active()).is_empty());
    assert_eq!(search(&log, Mode::Text, Some("new"), None, active()), ["a"]);
}
