//! Vector search on a store large enough for the approximate index: re-puts, stale marks and
//! moves reach it in the commit that makes them, and filtered queries still get `k`.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::T0;
use memcommit_core::search::vectors::ANN_FROM;
use memcommit_core::search::Mode;
use memcommit_core::{Command, Log, PutCommand, Query, SearchQuery, Status, Tier};

const DIMS: usize = 32;

/// Seeded vectors in 64 clusters.
struct Data {
    rng: u64,
    centres: Vec<Vec<f32>>,
}

impl Data {
    fn new() -> Data {
        let mut d = Data { rng: 99, centres: Vec::new() };
        d.centres = (0..64).map(|_| (0..DIMS).map(|_| d.normal()).collect()).collect();
        d
    }

    fn uniform(&mut self) -> f32 {
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.rng >> 40) as f32 / (1u64 << 24) as f32
    }

    fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0
    }

    fn next(&mut self) -> Vec<f32> {
        let c = (self.uniform() * 64.0) as usize % 64;
        (0..DIMS).map(|i| self.centres[c][i] + 0.8 * self.normal() / (1.0 + i as f32 / 8.0).sqrt()).collect()
    }
}

fn put(id: &str, tags: &[&str], v: &[f32]) -> Command {
    Command::Put(PutCommand::<String> {
        id: id.into(),
        kind: "note".into(),
        text: format!("text of {id}"),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        vector: Some(Arc::from(v)),
        ..PutCommand::default()
    })
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (n(a) * n(b))
}

/// The ids and scores of a vector query.
fn search(log: &Log, v: &[f32], k: usize, filter: Query<'_>) -> Vec<(String, f32)> {
    let q = SearchQuery { mode: Mode::Vector, text: None, vector: Some(v), k, filter };
    log.search(&q)
        .unwrap()
        .into_iter()
        .map(|(m, s)| (memcommit_core::format::view_trusted(&m.put).key_str().to_string(), s))
        .collect()
}

fn active<'a>() -> Query<'a> {
    Query { status: Some(Status::Active), ..Query::default() }
}

#[test]
fn the_approximate_index_follows_every_commit() {
    let (_dir, _path, log) =
        common::new_log_with(memcommit_core::Options { approximate_from: Some(ANN_FROM), ..common::opts() });
    let mut data = Data::new();
    let count = ANN_FROM + 10_000;
    // The store's vectors as they are now; none for a stale memory.
    let mut model: HashMap<String, Vec<f32>> = HashMap::new();
    let tagged = ["common"];
    for lo in (0..count).step_by(1000) {
        let cmds: Vec<Command> = (lo..(lo + 1000).min(count))
            .map(|i| {
                let v = data.next();
                model.insert(format!("m{i}"), v.clone());
                // Nineteen memories in twenty are tagged: a filter wide enough for the graph.
                put(&format!("m{i}"), if !i.is_multiple_of(20) { &tagged } else { &[] }, &v)
            })
            .collect();
        log.commit(&cmds, None, T0).unwrap();
    }
    let probe = model["m5"].clone();
    assert!(search(&log, &probe, 10, active()).iter().any(|h| h.0 == "m5"));
    // The first search started the graph's build, in the background. A wait whose `between`
    // fails (Ctrl-C, in the binding) stops with that error, and the build goes on; it is
    // beside the matrix once done.
    let mut calls = 0;
    let stopped = log.wait_for_vector_graph_between(&mut || {
        calls += 1;
        Err(memcommit_core::Error::Invalid { field: "interrupted", message: "stop".into() })
    });
    assert!(
        matches!(stopped, Err(memcommit_core::Error::Invalid { field: "interrupted", .. })),
        "{stopped:?}"
    );
    assert_eq!(calls, 1);
    assert!(log.wait_for_vector_graph().unwrap());
    assert!(log.search_heap_bytes() > count * DIMS * 4 + count * 64);

    // Mark some stale and re-put others with new vectors, a commit each.
    let olds: Vec<(String, Vec<f32>)> =
        (0..200).map(|i| format!("m{}", i * 101)).map(|id| (id.clone(), model[&id].clone())).collect();
    for (i, (id, _)) in olds.iter().enumerate() {
        if i.is_multiple_of(2) {
            let cmd = Command::<String>::SetStatus { id: id.clone(), status: Status::Stale, reason: None };
            log.commit(&[cmd], None, T0).unwrap();
            model.remove(id);
        } else {
            let v = data.next();
            log.commit(&[put(id, &[], &v)], None, T0).unwrap();
            model.insert(id.clone(), v);
        }
    }
    let mut found = 0;
    for (i, (id, old)) in olds.iter().enumerate() {
        let hits = search(&log, old, 10, active());
        assert_eq!(hits.len(), 10);
        for (got, score) in &hits {
            let now = model.get(got).unwrap_or_else(|| panic!("{got} is stale and was returned"));
            // Scored by the memory's vector now, not the one it had.
            assert!((score - cos(old, now)).abs() < 1e-4, "{got}: {score} {}", cos(old, now));
        }
        if i % 2 == 1 {
            found += usize::from(search(&log, &model[id], 10, active()).iter().any(|h| h.0 == *id));
        }
    }
    // The re-put memories are found by their new vectors (the graph is approximate: one may be
    // missed, as any other memory may).
    assert!(found >= 95, "{found} of 100 re-put memories found by their new vectors");

    // Move a few to the long tier: a tier filter finds them, and only them.
    let moved: Vec<String> = (0..15).map(|i| format!("m{}", 7 + i * 997)).collect();
    for id in &moved {
        log.commit(&[Command::<String>::Move { id: id.clone(), tier: Tier::Long }], None, T0).unwrap();
    }
    let long = Query { tier: Some(Tier::Long), ..active() };
    let hits = search(&log, &probe, 10, long);
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|(id, _)| moved.contains(id)), "{hits:?}");
    let mut want: Vec<(f32, &String)> = moved.iter().map(|id| (cos(&probe, &model[id]), id)).collect();
    want.sort_by(|a, b| b.0.total_cmp(&a.0));
    let got: Vec<&String> = hits.iter().map(|h| &h.0).collect();
    assert_eq!(got, want.iter().take(10).map(|w| w.1).collect::<Vec<_>>());

    // A filter that nineteen memories in twenty pass, through the graph: k of them come back, and
    // every one passes. (The re-put ones lost the tag.)
    let tags = ["common".to_string()];
    let common = Query { tags: Some(&tags), ..active() };
    for (_, old) in olds.iter().take(50) {
        let hits = search(&log, old, 10, common.clone());
        assert_eq!(hits.len(), 10);
        for (id, _) in &hits {
            let n: usize = id[1..].parse().unwrap();
            assert!(!n.is_multiple_of(20) && !olds.iter().any(|o| o.0 == *id), "{id} is not tagged");
        }
    }
}
