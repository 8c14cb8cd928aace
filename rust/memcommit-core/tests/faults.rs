//! The engine on a simulated file system (`memcommit_core::sim`): power loss at random points
//! and at every crash point, I/O errors swept over every operation, faults during recovery, and
//! a full disk. Each run is one seeded workload of commits, guards, role records, seals, automatic
//! seals, log compaction with retention, snapshots, index files and restarts, checked against
//! an oracle: the same workload run without faults, which records the state at every commit.
//!
//! After every simulated crash the store must reopen and:
//! (a) hold every commit acknowledged under `durability="commit"`, byte for byte;
//! (b) end on a commit boundary of the workload (the log is a prefix of what was issued);
//! (c) read exactly the oracle's state at that LSN;
//! (d) verify every seal;
//! (e) never use a half-written index file, snapshot or compacted log: the state is the same
//!     loaded from the index file, replayed without it, and restored from the last snapshot,
//!     and no temporary file is left beside the log.
//!
//! Run: `cargo test -p memcommit-core --features fault-injection --test faults -- --nocapture`
//! (the CI setting; each test prints its seeds and what it explored). The long setting:
//! `MEMCOMMIT_FAULT_SEEDS=500` (seeds per test; also sweeps every N of the I/O-error sweep).
//! One seed: `MEMCOMMIT_FAULT_SEED=<seed>`, printed with every failure.
#![cfg(feature = "fault-injection")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memcommit_core::compact::{Compacted, Hooks, Retention};
use memcommit_core::format;
use memcommit_core::index_file::IndexFileStatus;
use memcommit_core::sim::{Crash, Fault, Op, Rng, SimFs};
use memcommit_core::{Command, Durability, Error, Log, Options, PutCommand, Query, Status, Tier};

const T0: i64 = 1_700_000_000_000_000;
const IDS: u64 = 24;

/// The seeds a test runs: `MEMCOMMIT_FAULT_SEED` alone, or `MEMCOMMIT_FAULT_SEEDS` of them
/// (default `ci`) from a base that differs per test.
fn seeds(test: &str, ci: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("MEMCOMMIT_FAULT_SEED") {
        return vec![s.parse().expect("MEMCOMMIT_FAULT_SEED is a number")];
    }
    let n = std::env::var("MEMCOMMIT_FAULT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(ci);
    let base =
        test.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (0..n).map(|i| base.wrapping_add(i * 7919) % 1_000_000_007).collect()
}

fn long() -> bool {
    std::env::var("MEMCOMMIT_FAULT_SEEDS").is_ok()
}

/// A simulation mounted on a directory of its own, taken off when dropped.
struct Mount(Arc<SimFs>);

impl Mount {
    fn new() -> Mount {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = format!("/memcommit-sim/{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        Mount(SimFs::mount(dir))
    }

    fn path(&self) -> PathBuf {
        self.0.root().join("s.log")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.0.unmount();
    }
}

impl std::ops::Deref for Mount {
    type Target = SimFs;
    fn deref(&self) -> &SimFs {
        &self.0
    }
}

struct Quiet;
impl Hooks for Quiet {
    fn before_swap(&mut self, _: &Compacted) -> memcommit_core::Result<()> {
        Ok(())
    }
}

fn options(durability: Durability) -> Options {
    Options { durability, index_file_every: 1, flush_interval_ms: 5, ..Options::default() }
}

/// Where a log stands: (generation, LSN).
type At = (u64, u64);

fn at(log: &Log) -> At {
    (log.info().map(|i| i.generation).unwrap_or(u64::MAX), log.lsn())
}

/// Everything a reader can see, in a form to compare across logs of different store ids (so
/// without record framing, chain values or offsets' salts).
fn view(log: &Log) -> Result<Vec<String>, Error> {
    let ids: Vec<String> = (0..IDS).map(|i| format!("m{i}")).collect();
    let mut out = Vec::new();
    for (id, m) in ids.iter().zip(log.get_many(&ids)?) {
        out.push(match m {
            // (Which ids retention purged is the compaction manifest's to say, not the log's.)
            None => format!("{id}: -"),
            Some(m) => {
                // The id hash and the id's place in the id arena are how this index stores it.
                let e = memcommit_core::Entry { hash: 0, id_off: 0, ..m.entry };
                let r = format::view_trusted(&m.put);
                format!("{id}: {e:?} lsn={} at={} {:?}", r.lsn, r.at, String::from_utf8_lossy(r.payload))
            }
        });
    }
    let order: Vec<String> =
        log.find(&Query::default())?.iter().map(|m| format!("{:?}", m.entry.put_off)).collect();
    out.push(format!("order {order:?}"));
    let mut ents = log.entities()?;
    ents.sort();
    out.push(format!("entities {ents:?}"));
    let tasks: Vec<bool> =
        (0..3).map(|t| log.is_task_finished(&format!("t{t}"))).collect::<Result<_, _>>()?;
    out.push(format!("tasks {tasks:?}"));
    let seals: Vec<(u64, u64, bool)> = log.seals()?.iter().map(|s| (s.lsn, s.record_lsn, s.keyed)).collect();
    out.push(format!("seals {seals:?}"));
    out.push(format!("lsn {} records {}", log.lsn(), log.info()?.records));
    Ok(out)
}

/// The view one record earlier, when the newest record is a seal of its own commit (an
/// automatic seal follows the commit it seals as a commit of its own, so a crash may keep the
/// commit without it).
fn before_seal(view: &[String], log: &Log) -> Option<Vec<String>> {
    let seals = log.seals().ok()?;
    if seals.last().is_none_or(|s| s.record_lsn != log.lsn()) {
        return None;
    }
    let info = log.info().ok()?;
    let earlier: Vec<(u64, u64, bool)> =
        seals[..seals.len() - 1].iter().map(|s| (s.lsn, s.record_lsn, s.keyed)).collect();
    let mut v = view.to_vec();
    let n = v.len();
    v[n - 2] = format!("seals {earlier:?}");
    v[n - 1] = format!("lsn {} records {}", log.lsn() - 1, info.records - 1);
    Some(v)
}

/// Whether an error is the file system's (the run stops there) rather than the workload's
/// own refusal (a guard, an unknown memory).
fn is_io(e: &Error) -> bool {
    matches!(e, Error::Io { .. } | Error::WriterFailed { .. })
}

/// What a workload did.
#[derive(Default)]
struct Outcome {
    /// The state at every (generation, LSN) the workload passed (the oracle's run).
    views: BTreeMap<At, Vec<String>>,
    /// The newest LSN acknowledged durable (under `durability="commit"`).
    acked: u64,
    /// The newest LSN a call returned, whatever the durability.
    last: u64,
    /// After each call that returned: the simulation's mutating operations so far, and the LSN.
    acks: Vec<(u64, u64)>,
    /// Snapshots taken: where, and their JSON.
    snapshots: Vec<(At, String)>,
    /// The I/O error that stopped the run, if one did.
    error: Option<Error>,
    /// What the log did after that error: every call refused (`WriterFailed` or the error again).
    refused_after: bool,
}

/// Run the seeded workload of `steps` operations on the log at `path`.
fn workload(m: &Mount, seed: u64, steps: u64, durability: Durability, record: bool) -> Outcome {
    let path = &m.path();
    let mut rng = Rng(seed);
    let mut out = Outcome::default();
    let opts = options(durability);
    let mut log = match Log::open(path, opts.clone()) {
        Ok(l) => l,
        Err(e) => {
            assert!(is_io(&e), "seed {seed}: opening a new log failed with {e}");
            (out.error, out.refused_after) = (Some(e), true); // no writer to take anything
            return out;
        }
    };
    let mut purged: BTreeSet<u64> = BTreeSet::new();
    let note = |log: &Log, out: &mut Outcome| {
        if record {
            let v = view(log).expect("the oracle's run reads its own log");
            let (generation, lsn) = at(log);
            if let Some(earlier) = before_seal(&v, log) {
                out.views.entry((generation, lsn - 1)).or_insert(earlier);
            }
            out.views.insert((generation, lsn), v);
        }
        out.last = log.lsn();
        out.acks.push((m.steps(), log.lsn()));
        if durability == Durability::Commit {
            out.acked = log.lsn();
        }
    };
    note(&log, &mut out);
    for step in 0..steps {
        let t = T0 + step as i64 * 1_000;
        let pick = |rng: &mut Rng, purged: &BTreeSet<u64>| loop {
            let i = rng.below(IDS);
            if !purged.contains(&i) {
                break format!("m{i}");
            }
        };
        let r = rng.below(100);
        let result: Result<(), Error> = match r {
            0..=44 => {
                let n = 1 + rng.below(3);
                let cmds: Vec<Command> = (0..n)
                    .map(|k| {
                        let id = pick(&mut rng, &purged);
                        let max = if rng.below(10) == 0 { 3000 } else { 300 };
                        let len = rng.below(max) as usize;
                        Command::Put(PutCommand {
                            text: format!("{id} at step {step}.{k}: {}", "é".repeat(len)),
                            kind: if rng.below(2) == 0 { "trace".into() } else { "fact".into() },
                            task: Some(format!("t{}", rng.below(3))),
                            data: (rng.below(3) == 0).then(|| format!("{{\"step\":{step}}}")),
                            tags: vec![format!("g{}", rng.below(4))],
                            id,
                            ..PutCommand::default()
                        })
                    })
                    .collect();
                log.commit(&cmds, None, t).map(|_| ())
            }
            45..=54 => {
                let id = pick(&mut rng, &purged);
                let cmd = if rng.below(2) == 0 {
                    let status = if rng.below(2) == 0 { Status::Stale } else { Status::Active };
                    Command::SetStatus { id, status, reason: None }
                } else {
                    let tier = [Tier::Working, Tier::Mid, Tier::Long, Tier::Archive][rng.below(4) as usize];
                    Command::Move { id, tier }
                };
                log.commit(&[cmd], None, t).map(|_| ())
            }
            55..=62 => {
                // A guard: the LSN the caller read, right or stale.
                let right = rng.below(2) == 0 || log.lsn() == 0;
                let expect = if right { log.lsn() } else { log.lsn() - 1 };
                let id = pick(&mut rng, &purged);
                let cmd = Command::Put(PutCommand {
                    id,
                    kind: "fact".into(),
                    text: format!("guarded {step}"),
                    ..Default::default()
                });
                match log.commit(&[cmd], Some(expect), t) {
                    Err(Error::Rejected(_)) if !right => Ok(()),
                    Ok(_) if right => Ok(()),
                    Err(e) if is_io(&e) => Err(e),
                    other => panic!("seed {seed} step {step}: a guard expecting LSN {expect} (right: {right}) gave {other:?}"),
                }
            }
            63..=69 => {
                let key = format!("lock\0k{}", rng.below(6));
                let state = (rng.below(4) != 0).then(|| format!("{{\"owner\":\"a{step}\"}}").into_bytes());
                // The roles wait for durability after writing (as `wait_durable` documents).
                match log.write_entities(&[(&key, state.as_deref())], t) {
                    Ok(Some(c)) => log.wait_durable(c.end),
                    other => other.map(|_| ()),
                }
            }
            70..=75 => log.seal(None, t).map(|_| ()),
            76..=78 => {
                let every = (rng.below(2) == 0).then(|| 2 + rng.below(8));
                log.set_auto_seal(every.map(|every| memcommit_core::AutoSeal { every, key: None }))
            }
            79..=82 => {
                let victim = rng.below(IDS);
                let retention =
                    Retention { ids: vec![format!("m{victim}")], now_us: t, ..Retention::default() };
                match log.compact(None, &retention, t, &mut Quiet) {
                    Ok((done, next)) => {
                        for id in &done.plan.purged {
                            purged.insert(id[1..].parse().expect("an id m<n>"));
                        }
                        log = next;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            83..=86 => log.write_index_file(),
            87..=90 => log.snapshot_json().map(|json| out.snapshots.push((at(&log), json))),
            91..=94 => match log.close() {
                Ok(()) => Log::open(path, opts.clone()).map(|l| log = l),
                Err(e) => Err(e),
            },
            _ => {
                log.commit(&[Command::FinishTask { task: format!("t{}", rng.below(3)) }], None, t).map(|_| ())
            }
        };
        if std::env::var("MEMCOMMIT_FAULT_TRACE").is_ok() {
            eprintln!("step {step} (choice {r}): {result:?} -> {:?}", at(&log));
        }
        match result {
            Ok(()) => note(&log, &mut out),
            Err(e) if is_io(&e) => {
                // Whether the writer now refuses everything.
                out.refused_after = log.check_not_failed().is_err();
                out.error = Some(e);
                break;
            }
            Err(_) => note(&log, &mut out), // the workload's own refusal: nothing written
        }
    }
    drop(log);
    out
}

/// The oracle: the workload of `seed` without faults, and the trace of its operations.
fn oracle(seed: u64, steps: u64) -> (Outcome, Vec<(Op, String)>) {
    let m = Mount::new();
    let o = workload(&m, seed, steps, Durability::Commit, true);
    assert!(o.error.is_none(), "seed {seed}: the oracle's run failed: {:?}", o.error);
    (o, m.trace())
}

/// Reopen after a crash and check (a) to (e); `Err` names the violation.
fn check_recovery(m: &Mount, seed: u64, want: &Outcome, run: &Outcome) -> Result<(), String> {
    let path = m.path();
    let log = Log::open(&path, options(Durability::Commit)).map_err(|e| format!("reopening failed: {e}"))?;
    let here = at(&log);
    let got = view(&log).map_err(|e| format!("reading the recovered log failed: {e}"))?;
    let Some(expected) = want.views.get(&here) else {
        return Err(format!("recovered at {here:?}, which is no commit boundary of the workload"));
    };
    if got != *expected {
        let i = got.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "state at {here:?} differs from the oracle's:\n got  {}\n want {}",
            got[i], expected[i]
        ));
    }
    if here.1 < run.acked {
        return Err(format!("recovered to LSN {}, but LSN {} was acknowledged", here.1, run.acked));
    }
    log.verify(None, None).map_err(|e| format!("verify failed after recovery: {e}"))?;
    let names: Vec<String> = m.names().iter().map(|n| n.to_string_lossy().into_owned()).collect();
    if let Some(stray) = names.iter().find(|n| !["s.log", "s.log.lock", "s.log.index"].contains(&n.as_str()))
    {
        return Err(format!("{stray} is left beside the log after recovery ({names:?})"));
    }
    // The newest snapshot the recovered log has reached restores the same state.
    if let Some((snap_at, json)) = run.snapshots.iter().rev().find(|(a, _)| a.0 == here.0 && a.1 <= here.1) {
        drop(log);
        let restored = Log::open_with_snapshot(&path, options(Durability::Commit), json.as_bytes())
            .map_err(|e| format!("opening with the snapshot of {snap_at:?} failed: {e}"))?;
        let got = view(&restored).map_err(|e| e.to_string())?;
        if got != *expected {
            let i = got.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "restored from the snapshot of {snap_at:?}, the state differs:\n got  {}\n want {}",
                got[i], expected[i]
            ));
        }
        restored.close().map_err(|e| format!("closing failed: {e}"))?;
    } else {
        log.close().map_err(|e| format!("closing failed: {e}"))?;
    }
    // Loaded from the index file the close wrote, and replayed without it: the same state.
    let loaded =
        Log::open(&path, options(Durability::Commit)).map_err(|e| format!("reopening failed: {e}"))?;
    if loaded.info().map_err(|e| e.to_string())?.index_file != IndexFileStatus::Loaded && here.1 > 0 {
        return Err("the index file written at close was not used by the next open".into());
    }
    if view(&loaded).map_err(|e| e.to_string())? != *expected {
        return Err("loaded from the index file, the state differs".into());
    }
    drop(loaded);
    let _ = seed;
    Ok(())
}

fn replay_hint(test: &str, seed: u64) -> String {
    format!(
        "replay with: MEMCOMMIT_FAULT_SEED={seed} cargo test -p memcommit-core --features fault-injection --test faults {test} -- --nocapture"
    )
}

const MODES: [Crash; 4] = [
    Crash::DropUnsynced,
    Crash::KeepPrefix,
    Crash::KeepSubset { sector: 512 },
    Crash::KeepSubset { sector: 4096 },
];

/// Simulated power loss at random points of the workload, in every mode, under both durable
/// modes; sometimes a second crash during the recovery itself.
#[test]
fn power_loss_at_random_points_loses_nothing_acknowledged() {
    let steps = 60;
    let mut states = BTreeMap::<String, u64>::new();
    let mut recoveries_crashed = 0;
    for seed in seeds("power_loss", 12) {
        let (want, trace) = oracle(seed, steps);
        let mut rng = Rng(seed ^ 1);
        for (mi, mode) in MODES.iter().enumerate() {
            for durability in [Durability::Commit, Durability::Batch] {
                for _ in 0..4 {
                    let m = Mount::new();
                    let point = rng.below(trace.len() as u64 + 1);
                    m.crash_at(point);
                    let run = workload(&m, seed, steps, durability, false);
                    // Under "batch": every call that returned before the log's last fsync (the
                    // timer's, or one the call itself made) must survive; at most what came
                    // after it, one timer interval, may be lost.
                    let last_sync = m
                        .trace()
                        .iter()
                        .rposition(|(op, name)| matches!(op, Op::SyncData | Op::SyncAll) && name == "s.log");
                    let before_sync = |&&(step, _): &&(u64, u64)| last_sync.is_some_and(|i| step <= i as u64);
                    let batch_acked =
                        run.acks.iter().filter(before_sync).map(|&(_, lsn)| lsn).max().unwrap_or(0);
                    m.power_loss(*mode, seed.wrapping_add(point));
                    // Now and then a crash, or an I/O error, during the recovery itself:
                    // recovery must converge.
                    if rng.below(3) == 0 {
                        for again in 0..1 + rng.below(3) {
                            if rng.below(2) == 0 {
                                m.crash_at(m.steps() + rng.below(6));
                            } else {
                                let nth = rng.below(12);
                                m.fail(Fault {
                                    op: None,
                                    nth,
                                    errno: libc::EIO,
                                    persistent: false,
                                    short_write: false,
                                });
                            }
                            let _ = Log::open(&m.path(), options(Durability::Commit));
                            m.heal();
                            m.power_loss(MODES[(mi + again as usize) % 4], seed ^ again);
                        }
                        recoveries_crashed += 1;
                    }
                    let acked = if durability == Durability::Commit { run.acked } else { batch_acked };
                    let run = Outcome { acked, snapshots: run.snapshots, ..Outcome::default() };
                    if let Err(why) = check_recovery(&m, seed, &want, &run) {
                        panic!(
                            "seed {seed}, {mode:?}, {durability:?}, crash at step {point} of {} ({:?}): {why}\n{}",
                            trace.len(),
                            trace.get(point as usize),
                            replay_hint("power_loss", seed)
                        );
                    }
                    *states.entry(format!("{mode:?} {durability:?}")).or_default() += 1;
                }
            }
        }
        println!("seed {seed}: {} operations, crash states so far {states:?}", trace.len());
    }
    println!(
        "power loss: crash states explored per mode {states:?}; {recoveries_crashed} with crashes or I/O \
         errors during recovery; violations 0"
    );
}

/// Every crash point of the workload (before and after each create, write, truncation, sync,
/// rename and removal, which covers each step of log compaction, the index file, new logs and
/// restarts): the store reopens on exactly the old or the new state, with nothing left over.
#[test]
fn every_crash_point_reopens_on_the_old_or_the_new_state() {
    let steps = if long() { 60 } else { 30 };
    let mut points = BTreeMap::<String, u64>::new();
    for seed in seeds("crash_points", 3) {
        let (want, trace) = oracle(seed, steps);
        for point in 0..=trace.len() as u64 {
            for mode in [Crash::DropUnsynced, Crash::KeepPrefix] {
                let m = Mount::new();
                m.crash_at(point);
                let run = workload(&m, seed, steps, Durability::Commit, false);
                m.power_loss(mode, seed ^ point);
                if let Err(why) = check_recovery(&m, seed, &want, &run) {
                    panic!(
                        "seed {seed}, {mode:?}, crash before step {point} of {} ({:?}): {why}\n{}",
                        trace.len(),
                        trace.get(point as usize),
                        replay_hint("every_crash_point", seed)
                    );
                }
            }
            let what = trace.get(point as usize).map_or("end".to_string(), |(op, name)| {
                let file = if name.contains(".tmp-compact") {
                    "compacted log"
                } else if name.contains(".tmp-index") || name.ends_with(".index") {
                    "index file"
                } else if name.contains(".tmp-create") {
                    "new log"
                } else if name.ends_with(".lock") {
                    "lock file"
                } else {
                    "log"
                };
                format!("{op:?} {file}")
            });
            *points.entry(what).or_default() += 1;
        }
        println!("seed {seed}: {} crash points", trace.len() + 1);
    }
    println!("crash points enumerated (each under 2 modes): {points:?}, violations 0");
}

/// An I/O error at the Nth operation of each kind, once and from then on, with each errno:
/// nothing is acknowledged that was not durable, the writer refuses everything after a failed
/// write or sync, the error names the file, and after the fault clears the store reopens whole.
#[test]
fn io_errors_at_every_operation_lose_nothing_acknowledged() {
    let steps = 25;
    let kinds = [
        Op::Create,
        Op::Write,
        Op::SetLen,
        Op::SyncData,
        Op::SyncAll,
        Op::SyncDir,
        Op::Rename,
        Op::Unlink,
        Op::Read,
    ];
    let mut runs = 0u64;
    for seed in seeds("io_errors", 1) {
        let (want, trace) = oracle(seed, steps);
        for kind in kinds {
            let count = trace.iter().filter(|(op, _)| *op == kind).count() as u64;
            let count = if kind == Op::Read { 40 } else { count };
            let stride = if long() || count <= 40 { 1 } else { count / 40 };
            for errno in [libc::EIO, libc::ENOSPC, libc::EDQUOT] {
                for persistent in [false, true] {
                    let mut n = 0;
                    while n <= count {
                        let m = Mount::new();
                        m.fail(Fault { op: Some(kind), nth: n, errno, persistent, short_write: false });
                        let run = workload(&m, seed, steps, Durability::Commit, false);
                        let fired = m.injected() > 0;
                        let ctx = format!(
                            "seed {seed}: {kind:?} #{n} fails with errno {errno} (persistent: {persistent})"
                        );
                        if let Some(e) = &run.error {
                            assert!(
                                e.to_string().contains("s.log"),
                                "{ctx}: the error does not name the file: {e}"
                            );
                            // A failed write or fsync of the log itself stops the writer; the index
                            // file and a compacted copy are written to a temp file that is dropped.
                            let on_log = m.fired().is_some_and(|(_, name)| name == "s.log");
                            let fsync = matches!(kind, Op::SyncData | Op::SyncAll);
                            assert!(
                                run.refused_after || !fsync || !on_log,
                                "{ctx}: after a failed fsync the writer took another commit ({e})"
                            );
                        }
                        m.heal();
                        m.power_loss(Crash::DropUnsynced, seed ^ n);
                        if let Err(why) = check_recovery(&m, seed, &want, &run) {
                            panic!("{ctx}: {why}\n{}", replay_hint("io_errors", seed));
                        }
                        runs += 1;
                        if !fired {
                            break;
                        }
                        n += stride;
                    }
                }
            }
        }
        // Short writes anywhere: the engine finishes each write and nothing is lost.
        let writes = trace.iter().filter(|(op, _)| *op == Op::Write).count() as u64;
        for n in 0..writes.min(40) {
            let m = Mount::new();
            m.fail(Fault {
                op: Some(Op::Write),
                nth: n,
                errno: 0,
                persistent: n % 2 == 0,
                short_write: true,
            });
            let run = workload(&m, seed, steps, Durability::Commit, false);
            assert!(run.error.is_none(), "seed {seed}: short write #{n} failed the run: {:?}", run.error);
            m.power_loss(Crash::DropUnsynced, n);
            if let Err(why) = check_recovery(&m, seed, &want, &run) {
                panic!("seed {seed}: short write #{n}: {why}\n{}", replay_hint("io_errors", seed));
            }
            runs += 1;
        }
    }
    println!("I/O-error sweep: {runs} runs (N values x kinds x errnos x once/persistent, and short writes), violations 0");
}

/// Each memory's last put payload (what compaction keeps, at new offsets).
fn payloads(log: &Log) -> Vec<Option<Vec<u8>>> {
    let ids: Vec<String> = (0..IDS).map(|i| format!("m{i}")).collect();
    log.get_many(&ids)
        .unwrap()
        .into_iter()
        .map(|m| m.map(|m| format::view_trusted(&m.put).payload.to_vec()))
        .collect()
}

/// The bytes a full disk's error says it needs.
fn needed(msg: &str) -> u64 {
    let after = msg.split("needs ").nth(1).unwrap_or_else(|| panic!("no figure in: {msg}"));
    after.split(' ').nth(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no figure in: {msg}"))
}

/// A full disk during a large commit, a compaction and an index-file write: the call fails
/// naming the file, the old state stays whole, and once there is room the store goes on.
#[test]
fn a_full_disk_leaves_the_old_state_whole() {
    let m = Mount::new();
    let path = m.path();
    let log = Log::open(&path, options(Durability::Commit)).unwrap();
    let put = |i: u64, len: usize| {
        Command::Put(PutCommand {
            id: format!("m{i}"),
            kind: "fact".into(),
            text: "x".repeat(len),
            ..Default::default()
        })
    };
    for i in 0..IDS {
        log.commit(&[put(i, 2000)], None, T0).unwrap();
    }
    let before = view(&log).unwrap();
    m.set_capacity(Some(m.used() + (64 << 10)));
    // Larger than the space the log has written ahead of itself, and than the free space.
    let big: Vec<Command> = (0..IDS).map(|i| put(i, 200_000)).collect();
    let e = log.commit(&big, None, T0).expect_err("a 5 MB commit on a disk with 64 KiB free");
    assert!(matches!(e, Error::WriterFailed { .. }), "{e:?}");
    assert_eq!(e.errno(), Some(libc::ENOSPC), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("s.log") && msg.contains("write failed"), "{msg}");
    assert!(msg.contains("needs at least") && needed(&msg) >= 256 << 10, "{msg}");
    drop(log);
    m.heal();
    m.power_loss(Crash::KeepPrefix, 1);
    let log = Log::open(&path, options(Durability::Commit)).unwrap();
    assert_eq!(view(&log).unwrap(), before, "the failed commit left a trace");
    // A small commit on a disk with less room than the log writes ahead of itself (1 MiB and
    // more): it goes in without the zeros, and survives a power loss.
    m.set_capacity(Some(m.used() + (16 << 10)));
    log.commit(&[put(1, 3000)], None, T0).expect("a 3 KB commit with 16 KiB free");
    let after_small = view(&log).unwrap();
    drop(log);
    m.power_loss(Crash::DropUnsynced, 2);
    m.heal();
    let log = Log::open(&path, options(Durability::Commit)).unwrap();
    assert_eq!(view(&log).unwrap(), after_small, "the commit made on a nearly full disk");
    // Compaction and the index file on a disk too small for their output: each says how much
    // room it needs, and with that much it succeeds.
    let mut log = log;
    let want = payloads(&log);
    for what in ["compact", "index"] {
        let before = view(&log).unwrap();
        m.set_capacity(Some(m.used() + 4096));
        let attempt = |log: &Arc<Log>| match what {
            "compact" => log.compact(None, &Retention::default(), T0, &mut Quiet).map(|(_, next)| next),
            _ => log.write_index_file().map(|()| log.clone()),
        };
        let Err(e) = attempt(&log) else { panic!("{what} succeeded on a full disk") };
        assert_eq!(e.errno(), Some(libc::ENOSPC), "{what}: {e}");
        let msg = e.to_string();
        assert!(msg.contains("s.log") && msg.contains("needs up to"), "{what}: {msg}");
        assert_eq!(view(&log).unwrap(), before, "{what}: the state changed");
        let names: Vec<String> = m.names().iter().map(|n| n.to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{what} left {names:?}");
        m.set_capacity(Some(m.used() + needed(&msg)));
        log = attempt(&log).unwrap_or_else(|e| panic!("{what} with the room it asked for: {e}"));
        m.heal();
        assert!(payloads(&log) == want, "{what}: the memories changed");
    }
    drop(log);
    let log = Log::open(&path, options(Durability::Commit)).unwrap();
    log.commit(&[put(0, 10)], None, T0).unwrap();
    drop(log);
    let log = Log::open(&path, options(Durability::Commit)).unwrap();
    log.verify(None, None).unwrap();
}

/// The checks have teeth: a store that acknowledged commits before they were durable (the
/// workload under `durability="none"`, its commits counted as acknowledged) fails them.
#[test]
fn the_checks_catch_commits_acknowledged_before_they_were_durable() {
    let steps = 30;
    let mut caught = 0;
    for seed in seeds("teeth", 5) {
        let (want, trace) = oracle(seed, steps);
        let m = Mount::new();
        // Stopped two thirds in: before the close that would make everything durable.
        m.crash_at(trace.len() as u64 * 2 / 3);
        let mut run = workload(&m, seed, steps, Durability::None, false);
        // Everything the run committed, as if each commit had been acknowledged durable.
        run.acked = run.last;
        m.power_loss(Crash::DropUnsynced, seed);
        // Ok: the workload's last sync (a compaction, a restart) covered everything.
        if let Err(why) = check_recovery(&m, seed, &want, &run) {
            assert!(why.contains("was acknowledged"), "seed {seed}: {why}");
            caught += 1;
        }
    }
    assert!(caught > 0, "no seed lost an unsynced commit: the checks would miss a lying fsync");
}

/// A writer's open that hits an I/O error anywhere (its stat of the log among them) fails or
/// opens the log as it is: it never takes the log for missing and makes a new one over it.
/// (It did: a failed stat counted as "no log yet". Found by the I/O errors during recovery.)
#[test]
fn an_io_error_during_open_never_replaces_the_log() {
    let m = Mount::new();
    let log = Log::open(&m.path(), options(Durability::Commit)).unwrap();
    for i in 0..10 {
        log.commit(&[put_text(i)], None, T0).unwrap();
    }
    let want = view(&log).unwrap();
    drop(log);
    for nth in 0..16 {
        for op in [Some(Op::Open), Some(Op::Read), None] {
            m.fail(Fault { op, nth, errno: libc::EIO, persistent: false, short_write: false });
            let opened = Log::open(&m.path(), options(Durability::Commit));
            m.heal();
            if let Ok(log) = opened {
                // (A read the fault failed after the open may have stopped the log.)
                if let Ok(got) = view(&log) {
                    assert_eq!(got, want, "{op:?} #{nth}: opened another state");
                }
            }
            m.power_loss(Crash::DropUnsynced, nth);
            let log = Log::open(&m.path(), options(Durability::Commit)).unwrap();
            assert_eq!(view(&log).unwrap(), want, "after {op:?} #{nth} failed an open");
        }
    }
}

fn put_text(i: u64) -> Command {
    Command::Put(PutCommand {
        id: format!("m{i}"),
        kind: "fact".into(),
        text: format!("text {i}"),
        ..Default::default()
    })
}

/// A compaction whose directory fsync fails after its rename: the call fails naming the file,
/// the store takes no more calls (a power loss may bring the old generation back, with none of
/// the commits made since), and a reopen goes on from what the directory holds, losing
/// nothing acknowledged, after a power loss too.
#[test]
fn a_failed_directory_fsync_after_a_compactions_rename_stops_the_store() {
    let m = Mount::new();
    let path = m.path();
    // No index file (whose write would fsync the directory at close).
    let no_index_file = Options { index_file_every: 0, ..options(Durability::Commit) };
    let log = Log::open(&path, no_index_file.clone()).unwrap();
    for i in 0..IDS {
        log.commit(&[put_text(i)], None, T0).unwrap();
    }
    let want = payloads(&log);
    // The hooks write no manifest here, so the compaction's one directory fsync is the one
    // after its rename.
    m.fail(Fault { op: Some(Op::SyncDir), nth: 0, errno: libc::EIO, persistent: true, short_write: false });
    let Err(e) = log.compact(None, &Retention::default(), T0, &mut Quiet) else {
        panic!("the compaction succeeded with its directory fsync failing")
    };
    assert!(e.to_string().contains("s.log") && e.to_string().contains("fsync the directory"), "{e}");
    assert_eq!(e.errno(), Some(libc::EIO), "{e}");
    let later = log.commit(&[put_text(0)], None, T0).expect_err("a commit after the failed fsync");
    let msg = later.to_string();
    assert!(msg.contains("reopen"), "{msg}");
    assert!(log.get_many(&["m0".to_string()]).is_err(), "a read after the failed fsync");
    drop(log);
    m.heal();
    let log = Log::open(&path, no_index_file.clone()).unwrap();
    assert!(payloads(&log) == want, "the memories changed");
    let again = Command::Put(PutCommand {
        id: format!("m{}", 0),
        kind: "fact".into(),
        text: format!("after the {}", "reopen"),
        ..Default::default()
    });
    log.commit(&[again], None, T0).unwrap();
    let acknowledged = payloads(&log);
    assert!(acknowledged != want);
    drop(log);
    m.power_loss(Crash::DropUnsynced, 3);
    let log = Log::open(&path, no_index_file.clone()).unwrap();
    assert!(payloads(&log) == acknowledged, "a commit acknowledged after the reopen was lost");
}
