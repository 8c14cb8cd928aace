//! What several test files share: a clock reading, quiet compaction hooks, options, a
//! history of memories to fill a log with, random histories for property tests, and the
//! records of a log file.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memcommit_core::compact::{Compacted, Hooks};
use memcommit_core::format::{self, FileHeader, RecordView, HEADER_LEN};
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

/// A new temporary directory and a writer (`opts`) on a new log `s.log` in it.
pub fn new_log() -> (tempfile::TempDir, PathBuf, Arc<Log>) {
    new_log_with(opts())
}

/// `new_log`, the log opened with `options`.
pub fn new_log_with(options: Options) -> (tempfile::TempDir, PathBuf, Arc<Log>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.log");
    let log = Log::open(&path, options).unwrap();
    (dir, path, log)
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

/// One step of a random history (property tests): a put of memory `m{i}` in version `v`
/// (version decides kind, task, tags and tier), a stale, a restore, a move, a finished task, an
/// entity's new state (or its removal), or a seal.
#[derive(Clone, Debug)]
pub enum Step {
    Put(u8, u8),
    Stale(u8),
    Restore(u8),
    Move(u8, u8),
    Task(u8),
    Entity(u8, Option<u8>),
    Seal,
}

/// A step on memories `m0..m{ids}`, tasks `t0..t2` and entities `lock\0e0..e{keys}`.
pub fn step(ids: u8, keys: u8) -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..ids, 0u8..4).prop_map(|(i, v)| Step::Put(i, v)),
        2 => (0..ids).prop_map(Step::Stale),
        1 => (0..ids).prop_map(Step::Restore),
        2 => (0..ids, 0u8..4).prop_map(|(i, t)| Step::Move(i, t)),
        1 => (0u8..3).prop_map(Step::Task),
        1 => (0..keys, proptest::option::of(0u8..9)).prop_map(|(k, v)| Step::Entity(k, v)),
        1 => Just(Step::Seal),
    ]
}

const TIERS: [Tier; 4] = [Tier::Working, Tier::Mid, Tier::Long, Tier::Archive];

/// Apply `steps`, one commit per inner list, from time `t` one millisecond apart. A commit the
/// store refuses (about a memory not written yet) is dropped, as a user's would be; entities
/// and seals are written as they come.
pub fn run_history(log: &Log, steps: &[Vec<Step>], t: i64) {
    for (n, commit) in steps.iter().enumerate() {
        let at = t + n as i64 * 1_000;
        let mut cmds: Vec<Command> = Vec::new();
        for s in commit {
            match s {
                Step::Put(i, v) => cmds.push(Command::Put(PutCommand::<String> {
                    id: format!("m{i}"),
                    kind: if v % 2 == 0 { "trace".into() } else { "fact".into() },
                    text: format!("text {i} v{v}"),
                    task: (*v > 1).then(|| format!("t{v}")),
                    tags: (0..*v).map(|k| format!("g{k}")).collect(),
                    tier: (*v == 3).then_some(Tier::Mid),
                    ..PutCommand::default()
                })),
                Step::Stale(i) | Step::Restore(i) => cmds.push(Command::<String>::SetStatus {
                    id: format!("m{i}"),
                    status: if matches!(s, Step::Stale(_)) { Status::Stale } else { Status::Active },
                    reason: None,
                }),
                Step::Move(i, tier) => {
                    cmds.push(Command::<String>::Move { id: format!("m{i}"), tier: TIERS[*tier as usize] })
                }
                Step::Task(k) => cmds.push(Command::<String>::FinishTask { task: format!("t{k}") }),
                Step::Entity(k, v) => {
                    let state = v.map(|v| format!("{{\"v\":{v}}}").into_bytes());
                    log.write_entities(&[(&format!("lock\0e{k}"), state.as_deref())], at).unwrap();
                }
                Step::Seal => {
                    let _ = log.seal(None, at);
                }
            }
        }
        let _ = log.commit(&cmds, None, at);
    }
}

/// `f` of every record of the log file at `path` (its offset and the record), read with the
/// format's own parser, up to the first bytes that are not a record.
pub fn file_records<T>(path: &Path, mut f: impl FnMut(u64, &RecordView<'_>) -> T) -> Vec<T> {
    let b = std::fs::read(path).unwrap();
    let salt = FileHeader::decode(&b).unwrap().salt();
    let mut out = Vec::new();
    let mut off = HEADER_LEN;
    while off < b.len() {
        let Ok(r) = format::parse_record(&b[off..], salt, format::MAX_PAYLOAD_LEN) else { break };
        out.push(f(off as u64, &r));
        off += r.bytes.len();
    }
    out
}
