//! The memory records: what a command is, how each op's payload is laid out, and how a
//! payload decodes back into a memory.
//!
//! Payloads (little-endian):
//!
//! ```text
//! put     tier u8, status u8, flags u8 (bit 0 task, bit 1 data, bit 2 vector), reserved u8 (0),
//!         created_lsn u64 (0: this record's LSN), created_at i64, moved_at i64,
//!         kind str16, [task str16], tags u16 count × str16, sources u16 count × str16,
//!         text str32, [data str32 (JSON text)], [vector: dims u16 (> 0), dims × f32 (finite)]
//! status  status u8, has_reason u8, [reason str32]
//! move    tier u8
//! task    state u8 (1: finished)
//! ```
//!
//! A put carries the memory's whole state (tier, status, creation, last move) so that any later put of
//! the same id is enough to rebuild it: replay does not depend on records that log
//! compaction may drop.

use std::sync::Arc;

use crate::format::wire::{put_str16, put_str32, Reader};
use crate::format::Op;

/// A memory's tier. The archive is a tier like the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Tier {
    /// Fresh, in-task memories.
    Working = 0,
    /// Summaries and consolidated task memory.
    Mid = 1,
    /// Long-term knowledge.
    Long = 2,
    /// Folded originals: kept, not shown by default.
    Archive = 3,
}

/// Every tier, in order.
pub const TIERS: [Tier; 4] = [Tier::Working, Tier::Mid, Tier::Long, Tier::Archive];

impl Tier {
    /// The tier for a byte from the log.
    pub fn from_u8(b: u8) -> Option<Tier> {
        TIERS.get(b as usize).copied()
    }

    /// The tier a user names.
    pub fn parse(s: &str) -> Option<Tier> {
        TIERS.iter().copied().find(|t| t.name() == s)
    }

    /// The tier's name.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Working => "working",
            Tier::Mid => "mid",
            Tier::Long => "long",
            Tier::Archive => "archive",
        }
    }
}

/// Whether a memory is current.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// Current.
    Active = 0,
    /// Superseded or wrong; kept, hidden by default.
    Stale = 1,
}

impl Status {
    /// The status for a byte from the log.
    pub fn from_u8(b: u8) -> Option<Status> {
        match b {
            0 => Some(Status::Active),
            1 => Some(Status::Stale),
            _ => None,
        }
    }

    /// The status a user names.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "active" => Some(Status::Active),
            "stale" => Some(Status::Stale),
            _ => None,
        }
    }

    /// The status's name.
    pub fn name(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Stale => "stale",
        }
    }
}

/// The content of a put, as a caller gives it. `S` is `String`, or `&str` for a binding
/// that borrows its caller's strings instead of copying them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PutCommand<S = String> {
    /// The memory id.
    pub id: S,
    /// `note`, `trace`, `fact`, ... or any other kind.
    pub kind: S,
    /// The memory's text.
    pub text: S,
    /// A JSON object, as JSON text, or none.
    pub data: Option<S>,
    /// The task the memory belongs to.
    pub task: Option<S>,
    /// The tier of a new memory; a put to an existing id keeps the tier it has.
    pub tier: Option<Tier>,
    /// Tags.
    pub tags: Vec<S>,
    /// Ids of the memories this one derives from.
    pub sources: Vec<S>,
    /// The memory's embedding, or none. A put carries the memory's whole state, so a put
    /// without one leaves the memory without a vector.
    pub vector: Option<Arc<[f32]>>,
}

/// A guard: the commit is refused unless the memory matches every given field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect<S = String> {
    /// The memory id.
    pub id: S,
    /// Whether the memory must exist (or must not).
    pub exists: Option<bool>,
    /// The status it must have.
    pub status: Option<Status>,
    /// The tier it must be in.
    pub tier: Option<Tier>,
    /// The LSN of the newest record that touched it.
    pub lsn: Option<u64>,
}

/// One operation of a commit.
#[derive(Clone, Debug, PartialEq)]
pub enum Command<S = String> {
    /// Create a memory or replace its content.
    Put(PutCommand<S>),
    /// Change a memory's status, with an optional reason.
    SetStatus {
        /// The memory id.
        id: S,
        /// The new status.
        status: Status,
        /// Why (for stale).
        reason: Option<S>,
    },
    /// Change a memory's tier.
    Move {
        /// The memory id.
        id: S,
        /// The new tier.
        tier: Tier,
    },
    /// Mark a task finished.
    FinishTask {
        /// The task name.
        task: S,
    },
    /// A guard on one memory.
    Expect(Expect<S>),
}

impl<S: AsRef<str>> Command<S> {
    /// The memory the command is about (none for a finished task).
    pub fn memory_id(&self) -> Option<&str> {
        match self {
            Command::Put(p) => Some(p.id.as_ref()),
            Command::SetStatus { id, .. } | Command::Move { id, .. } => Some(id.as_ref()),
            Command::Expect(x) => Some(x.id.as_ref()),
            Command::FinishTask { .. } => None,
        }
    }

    /// The same command owning its strings.
    pub fn to_owned(&self) -> Command<String> {
        let o = |s: &S| s.as_ref().to_string();
        let oo = |s: &Option<S>| s.as_ref().map(|s| s.as_ref().to_string());
        match self {
            Command::Put(p) => Command::Put(PutCommand {
                id: o(&p.id),
                kind: o(&p.kind),
                text: o(&p.text),
                data: oo(&p.data),
                task: oo(&p.task),
                tier: p.tier,
                tags: p.tags.iter().map(o).collect(),
                sources: p.sources.iter().map(o).collect(),
                vector: p.vector.clone(),
            }),
            Command::SetStatus { id, status, reason } => {
                Command::SetStatus { id: o(id), status: *status, reason: oo(reason) }
            }
            Command::Move { id, tier } => Command::Move { id: o(id), tier: *tier },
            Command::FinishTask { task } => Command::FinishTask { task: o(task) },
            Command::Expect(x) => Command::Expect(Expect {
                id: o(&x.id),
                exists: x.exists,
                status: x.status,
                tier: x.tier,
                lsn: x.lsn,
            }),
        }
    }
}

/// The state fields a put record carries besides the caller's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutState {
    /// The memory's tier after the put.
    pub tier: Tier,
    /// The memory's status after the put.
    pub status: Status,
    /// The LSN of the memory's first put; 0 when this record is it.
    pub created_lsn: u64,
    /// When the memory was created (microseconds since the epoch).
    pub created_at: i64,
    /// When its tier last changed (its creation, if never moved).
    pub moved_at: i64,
}

impl PutState {
    /// The state a put creating a memory carries: in `tier` (working when not given), active,
    /// created and last moved at `at`.
    pub fn new_memory(tier: Option<Tier>, at: i64) -> PutState {
        PutState {
            tier: tier.unwrap_or(Tier::Working),
            status: Status::Active,
            created_lsn: 0,
            created_at: at,
            moved_at: at,
        }
    }
}

const PUT_HAS_TASK: u8 = 1;
const PUT_HAS_DATA: u8 = 2;
const PUT_HAS_VECTOR: u8 = 4;

/// The most dimensions a vector may have (its count is a u16).
pub const MAX_DIMS: usize = u16::MAX as usize;

/// Write a put payload.
pub fn encode_put<S: AsRef<str>>(out: &mut Vec<u8>, st: PutState, p: &PutCommand<S>) {
    let mut flags = 0;
    if p.task.is_some() {
        flags |= PUT_HAS_TASK;
    }
    if p.data.is_some() {
        flags |= PUT_HAS_DATA;
    }
    if p.vector.is_some() {
        flags |= PUT_HAS_VECTOR;
    }
    out.extend_from_slice(&[st.tier as u8, st.status as u8, flags, 0]);
    out.extend_from_slice(&st.created_lsn.to_le_bytes());
    out.extend_from_slice(&st.created_at.to_le_bytes());
    out.extend_from_slice(&st.moved_at.to_le_bytes());
    put_str16(out, p.kind.as_ref().as_bytes());
    if let Some(task) = &p.task {
        put_str16(out, task.as_ref().as_bytes());
    }
    out.extend_from_slice(&(p.tags.len() as u16).to_le_bytes());
    for t in &p.tags {
        put_str16(out, t.as_ref().as_bytes());
    }
    out.extend_from_slice(&(p.sources.len() as u16).to_le_bytes());
    for s in &p.sources {
        put_str16(out, s.as_ref().as_bytes());
    }
    put_str32(out, p.text.as_ref().as_bytes());
    if let Some(data) = &p.data {
        put_str32(out, data.as_ref().as_bytes());
    }
    if let Some(v) = &p.vector {
        out.extend_from_slice(&(v.len() as u16).to_le_bytes());
        for x in v.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// The bytes a put payload will take, to check the record limit before writing anything.
pub fn put_payload_len<S: AsRef<str>>(p: &PutCommand<S>) -> usize {
    28 + 2
        + p.kind.as_ref().len()
        + p.task.as_ref().map_or(0, |t| 2 + t.as_ref().len())
        + 2
        + p.tags.iter().map(|t| 2 + t.as_ref().len()).sum::<usize>()
        + 2
        + p.sources.iter().map(|s| 2 + s.as_ref().len()).sum::<usize>()
        + 4
        + p.text.as_ref().len()
        + p.data.as_ref().map_or(0, |d| 4 + d.as_ref().len())
        + p.vector.as_ref().map_or(0, |v| 2 + 4 * v.len())
}

/// The part of a put payload replay needs: everything but the text, data and sources.
#[derive(Clone, Debug)]
pub struct PutHead<'a> {
    /// State fields.
    pub state: PutState,
    /// Kind.
    pub kind: &'a str,
    /// Task.
    pub task: Option<&'a str>,
    /// Tags, in the order given.
    pub tags: Vec<&'a str>,
}

/// A put payload decoded in full.
#[derive(Clone, Debug)]
pub struct PutBody<'a> {
    /// The head fields.
    pub head: PutHead<'a>,
    /// Source ids.
    pub sources: Vec<&'a str>,
    /// Text.
    pub text: &'a str,
    /// JSON text of the data object.
    pub data: Option<&'a str>,
    /// The vector's bytes (`dims` little-endian f32s), if the put has one.
    pub vector: Option<&'a [u8]>,
}

impl PutBody<'_> {
    /// The vector's values.
    pub fn vector_values(&self) -> Option<Vec<f32>> {
        self.vector.map(vector_from_bytes)
    }
}

/// The f32 values of a vector's little-endian bytes.
pub fn vector_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn decode_put_head<'a>(r: &mut Reader<'a>) -> Option<(PutHead<'a>, u8)> {
    let tier = Tier::from_u8(r.u8()?)?;
    let status = Status::from_u8(r.u8()?)?;
    let flags = r.u8()?;
    if flags & !(PUT_HAS_TASK | PUT_HAS_DATA | PUT_HAS_VECTOR) != 0 || r.u8()? != 0 {
        return None;
    }
    let created_lsn = r.u64()?;
    let created_at = r.u64()? as i64;
    let moved_at = r.u64()? as i64;
    let kind = r.str16()?;
    let task = if flags & PUT_HAS_TASK != 0 { Some(r.str16()?) } else { None };
    let n = r.u16()? as usize;
    let mut tags = Vec::with_capacity(n);
    for _ in 0..n {
        tags.push(r.str16()?);
    }
    let state = PutState { tier, status, created_lsn, created_at, moved_at };
    Some((PutHead { state, kind, task, tags }, flags))
}

/// Decode the head of a put payload (what the index keeps).
pub fn decode_put_head_only(payload: &[u8]) -> Option<PutHead<'_>> {
    decode_put_head(&mut Reader::new(payload)).map(|(h, _)| h)
}

/// The `sources` of a put payload, read past its head without decoding it (what verify's
/// reference check needs of every put).
pub fn decode_put_sources(payload: &[u8]) -> Option<Vec<&str>> {
    let mut r = Reader::new(payload);
    r.take(4)?;
    let flags = payload[2];
    r.take(24)?;
    let skip16 = |r: &mut Reader<'_>| -> Option<()> {
        let n = r.u16()? as usize;
        r.take(n).map(|_| ())
    };
    skip16(&mut r)?;
    if flags & PUT_HAS_TASK != 0 {
        skip16(&mut r)?;
    }
    for _ in 0..r.u16()? {
        skip16(&mut r)?;
    }
    let n = r.u16()? as usize;
    let mut sources = Vec::with_capacity(n);
    for _ in 0..n {
        sources.push(r.str16()?);
    }
    Some(sources)
}

/// Decode a whole put payload.
pub fn decode_put(payload: &[u8]) -> Option<PutBody<'_>> {
    let mut r = Reader::new(payload);
    let (head, flags) = decode_put_head(&mut r)?;
    let n = r.u16()? as usize;
    let mut sources = Vec::with_capacity(n);
    for _ in 0..n {
        sources.push(r.str16()?);
    }
    let text = r.str32()?;
    let data = if flags & PUT_HAS_DATA != 0 { Some(r.str32()?) } else { None };
    let vector = if flags & PUT_HAS_VECTOR != 0 {
        let dims = r.u16()? as usize;
        let bytes = r.take(4 * dims)?;
        let finite = bytes.chunks_exact(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite());
        if dims == 0 || !finite {
            return None;
        }
        Some(bytes)
    } else {
        None
    };
    if !r.done() {
        return None;
    }
    Some(PutBody { head, sources, text, data, vector })
}

/// Write a status payload.
pub fn encode_status(out: &mut Vec<u8>, status: Status, reason: Option<&str>) {
    out.push(status as u8);
    match reason {
        Some(r) => {
            out.push(1);
            put_str32(out, r.as_bytes());
        }
        None => out.push(0),
    }
}

/// Decode a status payload.
pub fn decode_status(payload: &[u8]) -> Option<(Status, Option<&str>)> {
    let mut r = Reader::new(payload);
    let status = Status::from_u8(r.u8()?)?;
    let reason = match r.u8()? {
        0 => None,
        1 => Some(r.str32()?),
        _ => return None,
    };
    r.done().then_some((status, reason))
}

/// Decode a move payload.
pub fn decode_move(payload: &[u8]) -> Option<Tier> {
    match payload {
        [t] => Tier::from_u8(*t),
        _ => None,
    }
}

/// Decode a task payload: whether the task is finished.
pub fn decode_task(payload: &[u8]) -> Option<bool> {
    match payload {
        [1] => Some(true),
        _ => None,
    }
}

/// An entity record's payload: 1 and the state's JSON, or 0 for a removed entity.
pub fn encode_entity(out: &mut Vec<u8>, state: Option<&[u8]>) {
    match state {
        Some(json) => {
            out.push(1);
            out.extend_from_slice(json);
        }
        None => out.push(0),
    }
}

/// How the reason for a record that does not decode behind a valid checksum ends (a writer
/// never made it: a tool's bug, or an edit with its checksum recomputed).
pub const CHECKSUM_MATCHES: &str = "(its checksum matches)";

/// Whether a record's key and payload decode as its op says, beyond its checksum: a tool that
/// wrote a valid checksum over bytes memcommit never writes (invalid UTF-8, JSON that does not
/// parse) is caught here. `Err` says what does not decode.
pub fn check_contents(rec: &crate::format::RecordView<'_>) -> Result<(), &'static str> {
    if std::str::from_utf8(rec.key).is_err() {
        return Err("the record's key is not UTF-8");
    }
    match rec.op {
        Op::Put => {
            let body = decode_put(rec.payload).ok_or("malformed put payload (or text that is not UTF-8)")?;
            if let Some(data) = body.data {
                check_json(data.as_bytes()).map_err(|_| "a put whose data is not valid JSON")?;
            }
        }
        Op::Status => {
            decode_status(rec.payload).ok_or("malformed status payload")?;
        }
        Op::Move => {
            decode_move(rec.payload).ok_or("malformed move payload")?;
        }
        Op::Task => {
            decode_task(rec.payload).ok_or("malformed task payload")?;
        }
        Op::Seal => {
            crate::format::seal::decode(rec, 0).ok_or("malformed seal payload")?;
        }
        Op::Entity => check_entity(rec.payload)?,
    }
    Ok(())
}

/// An entity payload's check: the framing, and a state that is UTF-8 JSON.
pub fn check_entity(payload: &[u8]) -> Result<(), &'static str> {
    match decode_entity(payload).ok_or("malformed entity payload")? {
        Some(json) => check_json(json).map_err(|_| "an entity whose state is not valid UTF-8 JSON"),
        None => Ok(()),
    }
}

/// Whether `bytes` are one JSON value in UTF-8 (parsed, nothing kept). UTF-8 is checked on its
/// own: serde_json does not check the strings it skips.
pub fn check_json(bytes: &[u8]) -> Result<(), &'static str> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| ()).map_err(|_| "not JSON")
}

/// Read an entity payload: `Some(Some(json))`, `Some(None)` for a removal, `None` if malformed.
pub fn decode_entity(payload: &[u8]) -> Option<Option<&[u8]>> {
    match payload.split_first() {
        Some((1, json)) if !json.is_empty() => Some(Some(json)),
        Some((0, [])) => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_round_trip() {
        let p: PutCommand = PutCommand {
            id: "m1".into(),
            kind: "fact".into(),
            text: "héllo".into(),
            data: Some("{\"a\":1}".into()),
            task: Some("t".into()),
            tier: None,
            tags: vec!["x".into(), "y".into()],
            sources: vec!["s1".into()],
            vector: Some(vec![0.5, -1.0, 3.25].into()),
        };
        let st = PutState {
            tier: Tier::Mid,
            status: Status::Stale,
            created_lsn: 3,
            created_at: 99,
            moved_at: 120,
        };
        let mut out = Vec::new();
        encode_put(&mut out, st, &p);
        assert_eq!(out.len(), put_payload_len(&p));
        let b = decode_put(&out).unwrap();
        assert_eq!(b.head.state, st);
        assert_eq!(
            (b.head.kind, b.head.task, b.text, b.data),
            ("fact", Some("t"), "héllo", Some("{\"a\":1}"))
        );
        assert_eq!(b.head.tags, vec!["x", "y"]);
        assert_eq!(b.sources, vec!["s1"]);
        assert_eq!(b.vector_values().unwrap(), vec![0.5, -1.0, 3.25]);
        assert!(decode_put(&out[..out.len() - 1]).is_none());
        // A vector value that is not finite does not decode.
        let nan = out.len() - 4;
        out[nan..].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(decode_put(&out).is_none());
    }

    #[test]
    fn put_sources_are_read_past_any_head() {
        let st = PutState {
            tier: Tier::Working,
            status: Status::Active,
            created_lsn: 1,
            created_at: 2,
            moved_at: 3,
        };
        for (task, tags, sources) in [
            (None, vec![], vec![]),
            (Some("t".to_string()), vec![], vec!["a".to_string()]),
            (None, vec!["x".to_string(), "yy".to_string()], vec!["a".to_string(), "bé".to_string()]),
            (Some("task".to_string()), vec!["x".to_string()], vec!["s".to_string(); 3]),
        ] {
            let p: PutCommand = PutCommand {
                id: "m".into(),
                kind: "k".into(),
                text: "some text".into(),
                data: task.as_ref().map(|_| "{}".to_string()),
                task,
                tier: None,
                tags,
                sources,
                vector: None,
            };
            let mut out = Vec::new();
            encode_put(&mut out, st, &p);
            assert_eq!(decode_put_sources(&out).unwrap(), decode_put(&out).unwrap().sources);
            assert!(decode_put_sources(&out[..3]).is_none());
        }
    }
}
