//! Golden vectors: the on-disk format, frozen.
//!
//! Two deterministic logs (fixed store ids, fixed times) are built here with the format
//! functions directly and compared byte for byte with the files in `tests/vectors/` at the
//! repository root, each with a JSON file that describes every record (LSN, op, key, offset,
//! length, bytes, chain value after it):
//!
//! * `log-v1.bin` / `log-v1.json`: puts, statuses, moves, tasks and seals, every flag, a
//!   three-record commit;
//! * `log-v1-entities.bin` / `log-v1-entities.json`: the roles' entity records (op 6): a
//!   commit of two live entities, a removal, a state with non-ASCII text, beside a put and
//!   under a seal.
//!
//! Together they cover every op. The roles' entity JSON itself is frozen per role by
//! `tests/vectors/entities/` (`tests/test_entity_vectors.py`).
//!
//! To (re)generate the files after an intended format change (which is a new format version):
//!
//! ```text
//! MEMCOMMIT_WRITE_VECTORS=1 cargo test -p memcommit-core --test vectors
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use memcommit_core::format::chain::{self, ChainValue};
use memcommit_core::format::memory::{self, PutState};
use memcommit_core::format::{self, encode_record, FileHeader, Op, FLAG_COMMIT_END, HEADER_LEN};
use memcommit_core::seal;
use memcommit_core::{Command, Durability, Expect, Log, Options, PutCommand, Status, Tier};

const REGENERATE: &str = "MEMCOMMIT_WRITE_VECTORS=1 cargo test -p memcommit-core --test vectors";

/// One golden vector: a log built from `commits`, and where its files are.
struct Spec {
    /// The file name without its extension (`log-v1`).
    name: &'static str,
    bin: &'static str,
    json: &'static str,
    /// 16 ASCII bytes starting with "memc", so the salt is b"memc".
    store_id: [u8; 16],
    commits: fn() -> Vec<VCommit>,
}

/// The log of ops 1-5.
const MEMORIES: Spec = Spec {
    name: "log-v1",
    bin: concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/log-v1.bin"),
    json: concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/log-v1.json"),
    store_id: *b"memcommit-vec-v1",
    commits,
};

/// The log of entity records (op 6).
const ENTITIES: Spec = Spec {
    name: "log-v1-entities",
    bin: concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/log-v1-entities.bin"),
    json: concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/log-v1-entities.json"),
    store_id: *b"memcommit-vec-e1",
    commits: entity_commits,
};

const SPECS: [&Spec; 2] = [&MEMORIES, &ENTITIES];

/// The store id of the first vector log.
const STORE_ID: [u8; 16] = MEMORIES.store_id;
/// 2023-11-14T22:13:20Z in microseconds; commit `n` happens `n` seconds later.
const AT0: i64 = 1_700_000_000_000_000;

fn at(n: i64) -> i64 {
    AT0 + n * 1_000_000
}

/// One record of the vector log, with the state fields a put carries spelled out.
enum Rec {
    Put(PutCommand, PutState),
    Status(&'static str, Status, Option<&'static str>),
    Move(&'static str, Tier),
    Task(&'static str),
    /// A seal over every record before it, keyed with this secret if given.
    Seal(Option<&'static str>),
    /// An entity record: its key (`kind NUL key`) and its state's JSON, or `None` for a removal.
    Entity(&'static str, Option<&'static str>),
}

struct VCommit {
    at: i64,
    records: Vec<Rec>,
    /// The same commit as the engine takes it (guards included, which write nothing); empty
    /// for a seal and for a commit of entity records (`Log::write_entities` takes those).
    commands: Vec<Command>,
}

impl VCommit {
    /// A commit of one record at `at`, its command the one that writes that record.
    fn one(at: i64, record: Rec) -> VCommit {
        let commands = match &record {
            Rec::Put(p, _) => vec![Command::Put(p.clone())],
            Rec::Status(id, status, reason) => {
                vec![Command::SetStatus { id: s(id), status: *status, reason: reason.map(s) }]
            }
            Rec::Move(id, tier) => vec![Command::Move { id: s(id), tier: *tier }],
            Rec::Task(task) => vec![Command::FinishTask { task: s(task) }],
            Rec::Seal(_) | Rec::Entity(..) => vec![],
        };
        VCommit { at, records: vec![record], commands }
    }

    /// A commit at `at` of the put that creates memory `p`.
    fn new_memory(at: i64, p: PutCommand) -> VCommit {
        let tier = p.tier.unwrap_or(Tier::Working);
        VCommit::one(at, Rec::Put(p, new_state(tier, at)))
    }
}

fn s(v: &str) -> String {
    v.to_string()
}

/// A put of `text` as memory `id` of `kind`, every other field at its default.
fn put(id: &str, kind: &str, text: &str) -> PutCommand {
    PutCommand { id: s(id), kind: s(kind), text: s(text), ..Default::default() }
}

fn new_state(tier: Tier, at: i64) -> PutState {
    PutState { tier, status: Status::Active, created_lsn: 0, created_at: at, moved_at: at }
}

/// The vector log's commits: 13 commits, 16 records.
fn commits() -> Vec<VCommit> {
    let m1 = put("m1", "note", "hello");
    let m2 = PutCommand {
        data: Some(s(r#"{"confidence":0.9}"#)),
        task: Some(s("t1")),
        tier: Some(Tier::Long),
        tags: vec![s("sky"), s("color")],
        sources: vec![s("m1")],
        ..put("m2", "fact", "the sky is blue")
    };
    let m3 = PutCommand {
        task: Some(s("t1")),
        tier: Some(Tier::Mid),
        tags: vec![s("summary")],
        sources: vec![s("m1"), s("m2")],
        ..put("m3", "summary", "m1 and m2, summarised")
    };
    let m1b = PutCommand { tags: vec![s("greeting")], ..put("m1", "note", "hello, again") };
    let m4 = PutCommand {
        data: Some(s(r#"{"steps":[1,2,3],"ok":true}"#)),
        ..put("m4", "trace", "héllo ✓ — ünïcode")
    };
    let m4b = put("m4", "trace", "corrected");
    let m5 = PutCommand { task: Some(s("t2")), tier: Some(Tier::Archive), ..put("m5", "note", "") };
    vec![
        // LSN 1: the smallest put.
        VCommit::new_memory(at(1), m1),
        // LSN 2: a put with every field.
        VCommit::new_memory(at(2), m2),
        // LSNs 3-5: one commit of three records; only the last carries COMMIT_END.
        VCommit {
            at: at(3),
            records: vec![
                Rec::Put(m3.clone(), new_state(Tier::Mid, at(3))),
                Rec::Status("m1", Status::Stale, Some("folded into m3")),
                Rec::Move("m2", Tier::Archive),
            ],
            commands: vec![
                Command::Expect(Expect { id: s("m3"), exists: Some(false), ..Default::default() }),
                Command::Put(m3),
                Command::SetStatus { id: s("m1"), status: Status::Stale, reason: Some(s("folded into m3")) },
                Command::Expect(Expect {
                    id: s("m2"),
                    tier: Some(Tier::Long),
                    lsn: Some(2),
                    ..Default::default()
                }),
                Command::Move { id: s("m2"), tier: Tier::Archive },
            ],
        },
        // LSN 6: restore, no reason.
        VCommit::one(at(4), Rec::Status("m1", Status::Active, None)),
        // LSN 7: a put to an existing id carries its tier, status and creation.
        VCommit::one(
            at(5),
            Rec::Put(
                m1b,
                PutState {
                    tier: Tier::Working,
                    status: Status::Active,
                    created_lsn: 1,
                    created_at: at(1),
                    moved_at: at(1),
                },
            ),
        ),
        // LSN 8: a task finished.
        VCommit::one(at(6), Rec::Task("t1")),
        // LSN 9: a move.
        VCommit::one(at(7), Rec::Move("m3", Tier::Long)),
        // LSN 10: non-ASCII text and data.
        VCommit::new_memory(at(8), m4),
        // LSN 11: stale without a reason.
        VCommit::one(at(9), Rec::Status("m4", Status::Stale, None)),
        // LSN 12: a put to a stale memory keeps it stale.
        VCommit::one(
            at(10),
            Rec::Put(
                m4b,
                PutState {
                    tier: Tier::Working,
                    status: Status::Stale,
                    created_lsn: 10,
                    created_at: at(8),
                    moved_at: at(8),
                },
            ),
        ),
        // LSNs 13-14: a put straight into the archive, with a task, and that task finished.
        VCommit {
            at: at(11),
            records: vec![Rec::Put(m5.clone(), new_state(Tier::Archive, at(11))), Rec::Task("t2")],
            commands: vec![Command::Put(m5), Command::FinishTask { task: s("t2") }],
        },
        // LSN 15: a seal over LSNs 1-14.
        VCommit::one(at(12), Rec::Seal(None)),
        // LSN 16: a keyed seal over LSNs 1-15 (secret "vector secret").
        VCommit::one(at(13), Rec::Seal(Some("vector secret"))),
    ]
}

/// The entity vector log's commits: 5 commits, 6 records. The keys and states are of the
/// shapes the roles write (see `python/memcommit/roles/medium.py`).
fn entity_commits() -> Vec<VCommit> {
    let m1 = put("m1", "note", "hello");
    vec![
        // LSN 1: a put, so memories and entities share the log.
        VCommit::new_memory(at(1), m1),
        // LSNs 2-3: one commit of two live entities (a lock and the counter of its tokens);
        // only the last carries COMMIT_END.
        VCommit {
            at: at(2),
            records: vec![
                Rec::Entity("counter\0[\"locks.token\",\"job\"]", Some(r#"{"value":1}"#)),
                Rec::Entity(
                    "lock\0[\"job\"]",
                    Some(
                        r#"{"name":"job","owner":"worker-1","token":1,"acquired_at_ms":1700000002000,"expires_at_ms":1700000032000}"#,
                    ),
                ),
            ],
            commands: vec![],
        },
        // LSN 4: the lock removed (payload 0).
        VCommit::one(at(3), Rec::Entity("lock\0[\"job\"]", None)),
        // LSN 5: a state entity whose key and JSON hold non-ASCII text (UTF-8, not escaped).
        VCommit::one(
            at(4),
            Rec::Entity(
                "state\0[[\"agent\",\"préfs\"],\"greeting\"]",
                Some(
                    r#"{"namespace":["agent","préfs"],"key":"greeting","value":"héllo ✓","version":1,"updated_at_ms":1700000004000}"#,
                ),
            ),
        ),
        // LSN 6: a seal over LSNs 1-5.
        VCommit::one(at(5), Rec::Seal(None)),
    ]
}

/// One record as the JSON describes it.
struct RecordInfo {
    lsn: u64,
    op: Op,
    flags: u8,
    at: i64,
    key: String,
    offset: u64,
    bytes: Vec<u8>,
    chain: ChainValue,
}

struct Vectors {
    bin: Vec<u8>,
    header: [u8; HEADER_LEN],
    chain_start: ChainValue,
    records: Vec<RecordInfo>,
    final_chain: ChainValue,
}

/// The format version the golden files freeze: version 1, as written before version 2 added
/// `durable_gap` (zero in every record here). This build must go on reading them; what
/// version 2 adds is checked in `tests/recovery.rs`
/// (`records_carry_their_durable_gap_and_version_1_logs_stay_version_1`).
const VECTOR_VERSION: u32 = 1;

fn build(spec: &Spec) -> Vectors {
    let header =
        FileHeader { version: VECTOR_VERSION, store_id: spec.store_id, generation: 0, dense_from: 0 }
            .encode();
    let salt = FileHeader::decode(&header).unwrap().salt();
    let mut bin = header.to_vec();
    let chain_start = chain::start(&header);
    let mut value = chain_start;
    let mut records = Vec::new();
    let mut lsn = 0;
    for c in (spec.commits)() {
        let n = c.records.len();
        for (i, r) in c.records.iter().enumerate() {
            lsn += 1;
            let flags = if i + 1 == n { FLAG_COMMIT_END } else { 0 };
            let (op, key) = match r {
                Rec::Put(p, _) => (Op::Put, p.id.as_str()),
                Rec::Status(id, ..) => (Op::Status, *id),
                Rec::Move(id, _) => (Op::Move, *id),
                Rec::Task(t) => (Op::Task, *t),
                Rec::Seal(_) => (Op::Seal, ""),
                Rec::Entity(key, _) => (Op::Entity, *key),
            };
            let sealed = value;
            let range = encode_record(&mut bin, op, flags, 0, salt, lsn, c.at, key.as_bytes(), |o| match r {
                Rec::Put(p, st) => memory::encode_put(o, *st, p),
                Rec::Status(_, status, reason) => memory::encode_status(o, *status, *reason),
                Rec::Move(_, tier) => o.push(*tier as u8),
                Rec::Task(_) => o.push(1),
                Rec::Seal(secret) => {
                    let key = secret.map(|x| seal::derive_key(x.as_bytes()));
                    seal::encode_payload(o, lsn - 1, &sealed, key.as_ref())
                }
                Rec::Entity(_, state) => memory::encode_entity(o, state.map(str::as_bytes)),
            });
            let bytes = bin[range.clone()].to_vec();
            value = chain::step(&value, &bytes);
            records.push(RecordInfo {
                lsn,
                op,
                flags,
                at: c.at,
                key: key.to_string(),
                offset: range.start as u64,
                bytes,
                chain: value,
            });
        }
    }
    Vectors { bin, header, chain_start, records, final_chain: value }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn to_json(spec: &Spec, v: &Vectors) -> String {
    let mut out = String::new();
    out.push_str("{\n");
    out.push_str(&format!(
        "  \"description\": \"memcommit log format v1 golden vector: {}.bin, record by record. ",
        spec.name
    ));
    out.push_str("Generated by rust/memcommit-core/tests/vectors.rs; regenerate with ");
    out.push_str(REGENERATE);
    out.push_str("\",\n");
    out.push_str(&format!("  \"format_version\": {},\n", VECTOR_VERSION));
    out.push_str(&format!("  \"store_id\": \"{}\",\n", hex(&spec.store_id)));
    out.push_str(&format!("  \"header\": \"{}\",\n", hex(&v.header)));
    out.push_str(&format!("  \"chain_start\": \"{}\",\n", hex(&v.chain_start)));
    out.push_str("  \"records\": [\n");
    for (i, r) in v.records.iter().enumerate() {
        out.push_str(&format!(
            "    {{\"lsn\": {}, \"op\": \"{}\", \"flags\": {}, \"at\": {}, \"key\": {}, \"offset\": {}, \"length\": {}, \"hex\": \"{}\", \"chain\": \"{}\"}}{}\n",
            r.lsn,
            r.op.name(),
            r.flags,
            r.at,
            json_str(&r.key),
            r.offset,
            r.bytes.len(),
            hex(&r.bytes),
            hex(&r.chain),
            if i + 1 < v.records.len() { "," } else { "" }
        ));
    }
    out.push_str("  ],\n");
    out.push_str(&format!("  \"file_length\": {},\n", v.bin.len()));
    out.push_str(&format!("  \"final_chain\": \"{}\"\n", hex(&v.final_chain)));
    out.push_str("}\n");
    out
}

// ---------------------------------------------------------------------------------------------
// A small JSON reader, enough to read the vector file back as JSON (not as text).
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Num(i128),
    Str(String),
    Arr(Vec<J>),
    Obj(BTreeMap<String, J>),
}

impl J {
    fn get(&self, k: &str) -> &J {
        match self {
            J::Obj(m) => m.get(k).unwrap_or_else(|| panic!("JSON: no field {k:?}")),
            _ => panic!("JSON: not an object"),
        }
    }
    fn str(&self) -> &str {
        match self {
            J::Str(s) => s,
            other => panic!("JSON: expected a string, got {other:?}"),
        }
    }
    fn num(&self) -> i128 {
        match self {
            J::Num(n) => *n,
            other => panic!("JSON: expected a number, got {other:?}"),
        }
    }
    fn arr(&self) -> &[J] {
        match self {
            J::Arr(a) => a,
            other => panic!("JSON: expected an array, got {other:?}"),
        }
    }
}

struct P<'a> {
    b: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && b" \t\r\n".contains(&self.b[self.i]) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(self.b.get(self.i), Some(&c), "JSON: expected {:?} at byte {}", c as char, self.i);
        self.i += 1;
    }
    /// The items of an object or an array, from its opening bracket to `close`: `item` reads
    /// one, commas between.
    fn seq(&mut self, close: u8, mut item: impl FnMut(&mut Self)) {
        self.i += 1;
        self.ws();
        if self.b[self.i] == close {
            self.i += 1;
            return;
        }
        loop {
            item(self);
            self.ws();
            match self.b[self.i] {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return;
                }
                c => panic!("JSON: unexpected {:?} at byte {}", c as char, self.i),
            }
        }
    }

    fn value(&mut self) -> J {
        self.ws();
        match self.b[self.i] {
            b'{' => {
                let mut m = BTreeMap::new();
                self.seq(b'}', |p| {
                    p.ws();
                    let J::Str(k) = p.value() else { panic!("JSON: object key at byte {}", p.i) };
                    p.eat(b':');
                    let v = p.value();
                    assert!(m.insert(k.clone(), v).is_none(), "JSON: duplicate key {k:?}");
                });
                J::Obj(m)
            }
            b'[' => {
                let mut a = Vec::new();
                self.seq(b']', |p| a.push(p.value()));
                J::Arr(a)
            }
            b'"' => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    match self.b[self.i] {
                        b'"' => {
                            self.i += 1;
                            return J::Str(String::from_utf8(out).expect("JSON: UTF-8"));
                        }
                        b'\\' => {
                            let e = self.b[self.i + 1];
                            self.i += 2;
                            match e {
                                b'"' | b'\\' | b'/' => out.push(e),
                                b'n' => out.push(b'\n'),
                                b't' => out.push(b'\t'),
                                b'r' => out.push(b'\r'),
                                b'b' => out.push(8),
                                b'f' => out.push(12),
                                b'u' => {
                                    let h = std::str::from_utf8(&self.b[self.i..self.i + 4]).unwrap();
                                    let c = char::from_u32(u32::from_str_radix(h, 16).unwrap())
                                        .expect("JSON: no surrogates in these files");
                                    self.i += 4;
                                    out.extend_from_slice(c.to_string().as_bytes());
                                }
                                _ => panic!("JSON: bad escape at byte {}", self.i),
                            }
                        }
                        c => {
                            out.push(c);
                            self.i += 1;
                        }
                    }
                }
            }
            b't' if self.b[self.i..].starts_with(b"true") => {
                self.i += 4;
                J::Bool(true)
            }
            b'f' if self.b[self.i..].starts_with(b"false") => {
                self.i += 5;
                J::Bool(false)
            }
            b'n' if self.b[self.i..].starts_with(b"null") => {
                self.i += 4;
                J::Null
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len() && (self.b[self.i] == b'-' || self.b[self.i].is_ascii_digit()) {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.b[start..self.i]).unwrap();
                J::Num(t.parse().unwrap_or_else(|_| panic!("JSON: bad value at byte {start}")))
            }
        }
    }
}

fn parse_json(text: &str) -> J {
    let mut p = P { b: text.as_bytes(), i: 0 };
    let v = p.value();
    p.ws();
    assert_eq!(p.i, text.len(), "JSON: trailing bytes");
    v
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}

fn read_golden(path: &str) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => panic!(
            "golden vector file {path} cannot be read ({e}). Generate it with `{REGENERATE}` \
             (from the repository root) and commit tests/vectors/."
        ),
    }
}

/// The committed files of `spec`: (the binary log, the JSON text). With
/// MEMCOMMIT_WRITE_VECTORS=1 they are (re)written first, once per test run.
fn golden(spec: &Spec) -> (Vec<u8>, String) {
    static WRITTEN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    {
        let mut written = WRITTEN.lock().unwrap();
        if !written.contains(&spec.name) && std::env::var("MEMCOMMIT_WRITE_VECTORS").as_deref() == Ok("1") {
            let v = build(spec);
            std::fs::create_dir_all(Path::new(spec.bin).parent().unwrap()).unwrap();
            std::fs::write(spec.bin, &v.bin).unwrap();
            std::fs::write(spec.json, to_json(spec, &v)).unwrap();
            eprintln!("wrote {} ({} bytes) and {}", spec.bin, v.bin.len(), spec.json);
        }
        written.push(spec.name);
    }
    let bin = read_golden(spec.bin);
    let text = String::from_utf8(read_golden(spec.json)).expect("the JSON is UTF-8");
    (bin, text)
}

/// The bytes this build writes are the committed ones.
#[test]
fn log_bytes_match_the_golden_files() {
    for spec in SPECS {
        let v = build(spec);
        let json = to_json(spec, &v);
        let (bin, text) = golden(spec);
        if bin != v.bin {
            let at = first_difference(&bin, &v.bin);
            panic!(
                "{} differs from the bytes this build writes (first difference at byte {at}; file {} bytes, \
                 built {} bytes). The on-disk format changed: if that is intended it is a new format version; \
                 regenerate with `{REGENERATE}`.",
                spec.bin,
                bin.len(),
                v.bin.len()
            );
        }
        if text != json {
            let line = text.lines().zip(json.lines()).position(|(a, b)| a != b).unwrap_or(0) + 1;
            panic!(
                "{} differs from what this build generates (line {line}); regenerate with `{REGENERATE}`.",
                spec.json
            );
        }
    }
}

/// The committed JSON, read as JSON, agrees with the committed binary on every record.
#[test]
fn golden_json_describes_the_golden_log() {
    let mut every_op = std::collections::HashSet::new();
    for spec in SPECS {
        let (bin, text) = golden(spec);
        let j = parse_json(&text);
        assert_eq!(j.get("format_version").num(), VECTOR_VERSION as i128);
        assert_eq!(unhex(j.get("header").str()), bin[..HEADER_LEN]);
        let header = FileHeader::decode(&bin).unwrap();
        assert_eq!(unhex(j.get("store_id").str()), header.store_id);
        assert_eq!(header.store_id, spec.store_id);
        assert_eq!((header.generation, header.dense_from), (0, 0));
        let mut value = chain::start(&bin[..HEADER_LEN]);
        assert_eq!(unhex(j.get("chain_start").str()), value);
        let mut off = HEADER_LEN;
        let mut ops = std::collections::HashSet::new();
        let mut flags_seen = std::collections::HashSet::new();
        let recs = j.get("records").arr();
        for (i, r) in recs.iter().enumerate() {
            let bytes = unhex(r.get("hex").str());
            assert_eq!(r.get("offset").num(), off as i128, "{} record {i}", spec.name);
            assert_eq!(r.get("length").num(), bytes.len() as i128, "{} record {i}", spec.name);
            assert_eq!(bin[off..off + bytes.len()], bytes, "{} record {i}", spec.name);
            let rec = format::parse_record(&bin[off..], header.salt(), format::MAX_PAYLOAD_LEN).unwrap();
            assert_eq!(rec.bytes, &bytes[..], "{} record {i}", spec.name);
            assert_eq!(rec.lsn as i128, r.get("lsn").num(), "{} record {i}", spec.name);
            assert_eq!(rec.lsn, i as u64 + 1, "{} record {i}", spec.name);
            assert_eq!(rec.op.name(), r.get("op").str(), "{} record {i}", spec.name);
            assert_eq!(rec.flags as i128, r.get("flags").num(), "{} record {i}", spec.name);
            assert_eq!(rec.at as i128, r.get("at").num(), "{} record {i}", spec.name);
            assert_eq!(rec.key_str(), r.get("key").str(), "{} record {i}", spec.name);
            assert_eq!(memory::check_contents(&rec), Ok(()), "{} record {i}", spec.name);
            value = chain::step(&value, &bytes);
            assert_eq!(unhex(r.get("chain").str()), value, "{} record {i}", spec.name);
            ops.insert(rec.op.name());
            flags_seen.insert(rec.flags);
            off += bytes.len();
        }
        assert_eq!(off, bin.len());
        assert_eq!(j.get("file_length").num(), bin.len() as i128);
        assert_eq!(unhex(j.get("final_chain").str()), value);
        if spec.name == MEMORIES.name {
            assert_eq!(ops.len(), 5, "ops 1-5 are covered");
        }
        assert_eq!(flags_seen.len(), 2, "records with and without COMMIT_END");
        assert!(recs.last().unwrap().get("flags").num() == FLAG_COMMIT_END as i128);
        every_op.extend(ops);
    }
    let all = [Op::Put, Op::Status, Op::Move, Op::Task, Op::Seal, Op::Entity];
    assert_eq!(every_op, all.iter().map(|o| o.name()).collect(), "every op is covered");
    assert!((0..=u8::MAX).filter_map(Op::from_u8).all(|o| all.contains(&o)), "no op left out");
}

/// The engine, given the same commands at the same times, writes the same records (all but
/// the salt and checksum, which come from its random store id).
#[test]
fn the_engine_writes_what_the_vectors_freeze() {
    for spec in SPECS {
        let v = build(spec);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.log");
        let log = Log::open(&path, Options { durability: Durability::None, ..Options::default() }).unwrap();
        let mut lsn = 0;
        for c in (spec.commits)() {
            if let [Rec::Seal(secret)] = c.records[..] {
                let key = secret.map(|x| seal::derive_key(x.as_bytes()));
                let sealed = log.seal(key.as_ref(), c.at).unwrap();
                assert_eq!((sealed.lsn, sealed.record_lsn), (lsn, lsn + 1));
                lsn += 1;
                continue;
            }
            let entities: Vec<(&str, Option<&[u8]>)> = c
                .records
                .iter()
                .filter_map(|r| match r {
                    Rec::Entity(key, state) => Some((*key, state.map(str::as_bytes))),
                    _ => None,
                })
                .collect();
            let (first, last) = if entities.is_empty() {
                log.commit(&c.commands, Some(lsn), c.at).unwrap().unwrap()
            } else {
                assert_eq!(entities.len(), c.records.len(), "a commit of entity records holds nothing else");
                let done = log.write_entities(&entities, c.at).unwrap().unwrap();
                (done.first_lsn, done.last_lsn)
            };
            assert_eq!((first, last), (lsn + 1, lsn + c.records.len() as u64));
            lsn = last;
        }
        let engine = log.read_records(0, 0, usize::MAX).unwrap().0;
        let salt = FileHeader::decode(&std::fs::read(&path).unwrap()).unwrap().salt();
        assert_eq!(engine.len(), v.records.len());
        for (i, (e, g)) in engine.iter().zip(&v.records).enumerate() {
            let e = format::parse_record(e, salt, format::MAX_PAYLOAD_LEN).unwrap();
            let g_view =
                format::parse_record(&g.bytes, u32::from_le_bytes(*b"memc"), format::MAX_PAYLOAD_LEN)
                    .expect("the vector salt is the first four bytes of its store id");
            // A seal's chain value and keyed hash depend on the store id, which differs: compare
            // its version, flags and LSN here; `verify` checks the values below.
            let n = if e.op == Op::Seal { 10 } else { e.payload.len() };
            assert_eq!(
                (e.op, e.flags, e.lsn, e.at, e.key, &e.payload[..n]),
                (g.op, g.flags, g.lsn, g.at, g_view.key, &g_view.payload[..n.min(g_view.payload.len())]),
                "{} record {i}",
                spec.name
            );
        }
        let key = seal::derive_key(b"vector secret");
        let checked = log.verify(Some(&key), None).unwrap();
        let seals = v.records.iter().filter(|r| r.op == Op::Seal).count() as u64;
        assert_eq!((checked.seals_checked, checked.records), (seals, v.records.len() as u64));
        log.close().unwrap();
    }
}

/// The committed log of `spec`, copied into a new temporary directory and opened read-only.
struct GoldenCopy {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    /// The file's bytes.
    bin: Vec<u8>,
    /// The final chain value the JSON gives.
    final_chain: Vec<u8>,
    reader: std::sync::Arc<Log>,
}

impl GoldenCopy {
    /// Copy and open the golden log of `spec`, checking that the reader holds `records`
    /// records (the newest LSN the same) and `memories` memories, over all of the file.
    fn open(spec: &Spec, records: u64, memories: u64) -> (GoldenCopy, memcommit_core::LogInfo) {
        let (bin, text) = golden(spec);
        let final_chain = unhex(parse_json(&text).get("final_chain").str());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.bin", spec.name));
        std::fs::write(&path, &bin).unwrap();
        let reader = Log::open(&path, Options { read_only: true, ..Options::default() }).unwrap();
        let info = reader.info().unwrap();
        assert_eq!(
            (info.records, info.lsn, info.memories, info.bytes),
            (records, records, memories, bin.len() as u64)
        );
        (GoldenCopy { _dir: dir, path, bin, final_chain, reader }, info)
    }
}

/// A writer opens the golden copy at `path` (whose bytes are `bin`): it cuts nothing, holds
/// `records` records, passes `check`, and leaves the file as it was.
fn writer_opens_unchanged(path: &Path, bin: &[u8], records: u64, check: impl FnOnce(&Log)) {
    let log = Log::open(path, Options::default()).unwrap();
    let info = log.info().unwrap();
    assert_eq!((info.records, info.recovered_bytes), (records, 0));
    check(&log);
    log.close().unwrap();
    assert_eq!(std::fs::read(path).unwrap(), bin, "opening must not change the file");
}

/// The golden entity log opens with the engine and holds the entities it should: the lock is
/// gone, the counter and the state are live, each with its exact JSON.
#[test]
fn golden_entity_log_opens_with_the_engine() {
    let (golden, _) = GoldenCopy::open(&ENTITIES, 6, 1);
    let GoldenCopy { path, bin, final_chain, reader: log, .. } = &golden;
    assert_eq!(log.entity_version(), 4, "four entity records applied");
    let mut live = log.entities().unwrap();
    live.sort();
    let live: Vec<(&str, &str)> =
        live.iter().map(|(k, j)| (k.as_str(), std::str::from_utf8(j).unwrap())).collect();
    assert_eq!(
        live,
        [
            ("counter\0[\"locks.token\",\"job\"]", r#"{"value":1}"#),
            (
                "state\0[[\"agent\",\"préfs\"],\"greeting\"]",
                r#"{"namespace":["agent","préfs"],"key":"greeting","value":"héllo ✓","version":1,"updated_at_ms":1700000004000}"#
            ),
        ]
    );
    let checked = log.verify(None, None).unwrap();
    assert_eq!((checked.seals_checked, checked.records), (1, 6));
    assert_eq!(checked.value[..], final_chain[..]);
    assert_eq!(log.chain_value().unwrap()[..], final_chain[..]);
    log.close().unwrap();

    // A writer opens it too, cuts nothing, and agrees on the entities.
    writer_opens_unchanged(path, bin, 6, |log| assert_eq!(log.entities().unwrap().len(), 2));
}

/// The golden file opens with the engine and holds the memories it should.
#[test]
fn golden_log_opens_with_the_engine() {
    let (golden, info) = GoldenCopy::open(&MEMORIES, 16, 5);
    let GoldenCopy { path, bin, final_chain, reader: log, .. } = &golden;
    let seals = log.seals().unwrap();
    assert_eq!(
        seals.iter().map(|s| (s.lsn, s.record_lsn, s.keyed)).collect::<Vec<_>>(),
        [(14, 15, false), (15, 16, true)]
    );
    let key = seal::derive_key(b"vector secret");
    let checked = log.verify(Some(&key), None).unwrap();
    assert_eq!((checked.seals_checked, checked.records, checked.keyed_unchecked), (2, 16, 0));
    assert_eq!(checked.value[..], final_chain[..]);
    let wrong = seal::derive_key(b"another secret");
    assert!(matches!(
        log.verify(Some(&wrong), None),
        Err(memcommit_core::Error::SealMismatch { lsn: 16, .. })
    ));
    assert_eq!((info.generation, info.store_id.as_str()), (0, hex(&STORE_ID).as_str()));
    assert_eq!(log.chain_value().unwrap()[..], final_chain[..]);
    assert!(log.is_task_finished("t1").unwrap() && log.is_task_finished("t2").unwrap());
    assert!(!log.is_task_finished("t3").unwrap());

    let ids = ["m1", "m2", "m3", "m4", "m5", "m6"];
    let reads = log.get_many(&ids).unwrap();
    assert!(reads[5].is_none());
    // (id, tier, status, created_lsn, lsn of the last record touching it, text, kind, task, tags, sources, data)
    type Want<'a> = (
        Tier,
        Status,
        u64,
        u64,
        &'a str,
        &'a str,
        Option<&'a str>,
        Vec<&'a str>,
        Vec<&'a str>,
        Option<&'a str>,
    );
    let want: [Want<'_>; 5] = [
        (Tier::Working, Status::Active, 1, 7, "hello, again", "note", None, vec!["greeting"], vec![], None),
        (
            Tier::Archive,
            Status::Active,
            2,
            5,
            "the sky is blue",
            "fact",
            Some("t1"),
            vec!["sky", "color"],
            vec!["m1"],
            Some(r#"{"confidence":0.9}"#),
        ),
        (
            Tier::Long,
            Status::Active,
            3,
            9,
            "m1 and m2, summarised",
            "summary",
            Some("t1"),
            vec!["summary"],
            vec!["m1", "m2"],
            None,
        ),
        (Tier::Working, Status::Stale, 10, 12, "corrected", "trace", None, vec![], vec![], None),
        (Tier::Archive, Status::Active, 13, 13, "", "note", Some("t2"), vec![], vec![], None),
    ];
    for (i, w) in want.iter().enumerate() {
        let r = reads[i].as_ref().unwrap_or_else(|| panic!("{} missing", ids[i]));
        let (tier, status, created_lsn, lsn, text, kind, task, tags, sources, data) = w;
        assert_eq!(
            (r.entry.tier, r.entry.status, r.entry.created_lsn, r.entry.lsn),
            (*tier, *status, *created_lsn, *lsn),
            "{}",
            ids[i]
        );
        let rec =
            format::parse_record(&r.put, u32::from_le_bytes(*b"memc"), format::MAX_PAYLOAD_LEN).unwrap();
        let body = memory::decode_put(rec.payload).unwrap();
        assert_eq!(
            (body.text, body.head.kind, body.head.task, &body.head.tags, &body.sources, body.data),
            (*text, *kind, *task, tags, sources, *data),
            "{}",
            ids[i]
        );
    }
    log.close().unwrap();

    // A writer opens it too, cuts nothing, and agrees on the chain.
    writer_opens_unchanged(path, bin, 16, |log| assert_eq!(log.chain_value().unwrap()[..], final_chain[..]));
}
