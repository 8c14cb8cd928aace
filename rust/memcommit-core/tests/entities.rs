//! The roles' entities in the log: written as one commit, read back live, across reopen.

use memcommit_core::{Durability, Error, Log, Options};

fn opts() -> Options {
    Options { durability: Durability::None, ..Options::default() }
}

fn sorted(mut v: Vec<(String, Vec<u8>)>) -> Vec<(String, String)> {
    v.sort();
    v.into_iter().map(|(k, j)| (k, String::from_utf8(j).unwrap())).collect()
}

#[test]
fn the_newest_state_of_each_entity_survives_reopen_and_removals_stay_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.log");
    let log = Log::open(&path, opts()).unwrap();
    log.write_entities(&[("lock\0job", Some(br#"{"token":1}"#)), ("lock\0other", Some(b"{}"))], 1).unwrap();
    log.write_entities(&[("lock\0job", Some(br#"{"token":2}"#))], 2).unwrap();
    log.write_entities(&[("lock\0other", None)], 3).unwrap();
    let want = vec![("lock\0job".to_string(), r#"{"token":2}"#.to_string())];
    assert_eq!(sorted(log.entities().unwrap()), want);
    log.close().unwrap();
    let log = Log::open(&path, opts()).unwrap();
    assert_eq!(sorted(log.entities().unwrap()), want);
    assert_eq!(log.info().unwrap().memories, 0, "entities are not memories");
    assert!(log.history("lock\0job").unwrap().is_empty());
    // A seal covers them like any record.
    log.seal(None, 4).unwrap();
    assert_eq!(log.verify(None, None).unwrap().seals_checked, 1);
}

#[test]
fn a_bad_change_writes_nothing_of_its_batch() {
    let log = Log::memory(opts()).unwrap();
    let long = "k".repeat(2000);
    let r = log.write_entities(&[("a", Some(b"{}")), (long.as_str(), Some(b"{}"))], 1);
    assert!(matches!(r, Err(Error::Invalid { field: "key", .. })));
    let r = log.write_entities(&[("a", Some(b""))], 1);
    assert!(matches!(r, Err(Error::Invalid { field: "state", .. })));
    assert!(log.entities().unwrap().is_empty());
    assert_eq!(log.lsn(), 0);
}

#[test]
fn one_entity_or_every_entity_under_a_prefix_reads_in_key_order() {
    let log = Log::memory(opts()).unwrap();
    log.write_entities(
        &[
            ("run\0b", Some(br#"{"n":2}"#)),
            ("run\0a", Some(br#"{"n":1}"#)),
            ("runs\0x", Some(b"{}")),
            ("lock\0a", Some(b"{}")),
        ],
        1,
    )
    .unwrap();
    log.write_entities(&[("run\0c", Some(b"{}")), ("run\0c", None)], 2).unwrap();
    assert_eq!(log.entity(b"run\0a").unwrap().as_deref(), Some(&br#"{"n":1}"#[..]));
    assert_eq!(log.entity(b"run\0c").unwrap(), None, "removed in the same commit");
    assert_eq!(log.entity(b"run\0").unwrap(), None, "a prefix is not a key");
    let keys = |prefix: &[u8]| -> Vec<String> { log.entity_keys(prefix).unwrap() };
    assert_eq!(keys(b"run\0"), ["run\0a", "run\0b"], "in key order, and not runs\\0x");
    assert_eq!(keys(b""), ["lock\0a", "run\0a", "run\0b", "runs\0x"]);
    assert!(keys(b"zzz").is_empty());
    // A page at a time: after a key (itself excluded), at most so many.
    let page =
        |prefix: &[u8], after: Option<&[u8]>, limit| log.entity_keys_after(prefix, after, limit).unwrap();
    assert_eq!(page(b"", None, 2), ["lock\0a", "run\0a"]);
    assert_eq!(page(b"", Some(b"run\0a"), 2), ["run\0b", "runs\0x"]);
    assert_eq!(page(b"run\0", Some(b"run\0"), 9), ["run\0a", "run\0b"], "after the prefix itself");
    assert_eq!(page(b"run\0", Some(b"lock"), 9), ["run\0a", "run\0b"], "after a key before the prefix");
    assert_eq!(page(b"run\0", Some(b"run\0a\x01"), 9), ["run\0b"], "after a key that is not there");
    assert!(page(b"run\0", Some(b"run\0b"), 9).is_empty());
    assert!(page(b"run\0", None, 0).is_empty());
    let states = log.entities_of(&[b"run\0b", b"run\0c", b"lock\0a"]).unwrap();
    assert_eq!(states, [Some(br#"{"n":2}"#.to_vec()), None, Some(b"{}".to_vec())], "in the order asked");
    assert_eq!(log.entity_count(b"run\0").unwrap(), 2);
    assert_eq!(log.entity_count(b"").unwrap(), 4);
    log.close().unwrap();
    assert!(matches!(log.entity(b"run\0a"), Err(Error::Closed { .. })));
}
