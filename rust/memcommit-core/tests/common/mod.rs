//! What several test files share: a clock reading, quiet compaction hooks, options, and a
//! history of memories to fill a log with.
#![allow(dead_code)]

use memcommit_core::compact::{Compacted, Hooks};
use memcommit_core::{Command, Durability, Log, Options, PutCommand, Query, Status, Tier};

/// A clock reading, µs since the epoch.
pub const T0: i64 = 1_700_000_000_000_000;

/// Compaction hooks that do nothing.
pub struct Quiet;
impl Hooks for Quiet {
    fn before_swap(&mut self, _: &Compacted) -> memcommit_core::Result<()> {
        Ok(())
    }
}

/// A writer with no fsyncs and no index file at close.
pub fn opts() -> Options {
    Options { durability: Durability::None, index_file_every: 0, ..Options::default() }
}

/// A put of a note `id` with a task and tags.
pub fn put(id: &str, task: Option<&str>, tags: &[&str]) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: "note".into(),
        text: format!("text of {id}"),
        task: task.map(Into::into),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..PutCommand::default()
    })
}

/// Memories `m{from}..m{to}` with tasks and tags, every fifth marked stale and every seventh
/// moved; then task t1 finished and a role entity written.
pub fn fill(log: &Log, from: usize, to: usize) {
    for i in from..to {
        let id = format!("m{i}");
        log.commit(
            &[put(&id, Some(&format!("t{}", i % 3)), &["a", if i % 2 == 0 { "b" } else { "c" }])],
            None,
            T0,
        )
        .unwrap();
        if i % 5 == 0 {
            log.commit(
                &[Command::<String>::SetStatus { id: id.clone(), status: Status::Stale, reason: None }],
                None,
                T0,
            )
            .unwrap();
        }
        if i % 7 == 0 {
            log.commit(&[Command::<String>::Move { id, tier: Tier::Long }], None, T0).unwrap();
        }
    }
    log.commit(&[Command::<String>::FinishTask { task: "t1".into() }], None, T0).unwrap();
    log.write_entities(&[(&format!("lock\0k{from}"), Some(b"{}"))], T0).unwrap();
}

/// Everything a reader can see, in a form to compare.
pub fn view(log: &Log, upto: usize) -> Vec<String> {
    let ids: Vec<String> = (0..upto + 5).map(|i| format!("m{i}")).collect();
    let mut out: Vec<String> = log
        .get_many(&ids)
        .unwrap()
        .into_iter()
        .map(|m| {
            m.map_or("-".into(), |m| {
                // The hash is a cache of the id under the index's seed.
                let e = memcommit_core::Entry { hash: 0, ..m.entry };
                format!("{e:?} {:?}", m.put)
            })
        })
        .collect();
    let order: Vec<u64> = log.find(&Query::default()).unwrap().iter().map(|m| m.entry.put_off).collect();
    out.push(format!("{order:?}"));
    let tags = ["b".to_string()];
    let q = Query { tags: Some(&tags), kind: Some("note"), ..Default::default() };
    out.push(format!("{}", log.find(&q).unwrap().len()));
    let mut ents = log.entities().unwrap();
    ents.sort();
    out.push(format!("{ents:?} {:?} {}", log.seals().unwrap(), log.is_task_finished("t1").unwrap()));
    let info = log.info().unwrap();
    out.push(format!("{} {} {}", log.lsn(), info.records, info.bytes));
    let (recs, next) = log.read_records(log.lsn().saturating_sub(40), 0, 1000).unwrap();
    out.push(format!("{} {next} {:?}", recs.len(), recs.first()));
    out
}

pub fn assert_same(got: &[String], want: &[String]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w, "item {i}:\n got {}\nwant {}", &g[..g.len().min(400)], &w[..w.len().min(400)]);
    }
}
