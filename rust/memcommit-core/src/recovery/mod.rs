//! Recovery: what open, a reader's refresh and `inspect` (so `info`, `verify` and `repair`)
//! make of a log's bytes, by one rule. Replay (`engine::replay`) applies records onto the
//! state and stops where none follows; what that spot is (free space, a torn tail, a live
//! writer's bytes, or damage) is `scan::judge`'s verdict, with `judge_spot` adding the
//! record-from-the-future case. `inspect` runs the same rule over a closed file.

pub(crate) mod scan;
pub(crate) mod verify;
mod verify_commits;

use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::memory;
use crate::format::{self, hex, FileHeader, HEADER_LEN};
use crate::recovery::scan::{judge, record_at, Item, ReadAt, Scanner, Stop};

/// Facts about a log file read without opening a store.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// Whether the header parsed.
    pub header_ok: bool,
    /// What is wrong with the header, if anything.
    pub header_error: Option<String>,
    /// Whole committed records before any damage.
    pub records: u64,
    /// LSN of the last good commit.
    pub lsn: u64,
    /// File size.
    pub bytes: u64,
    /// Log generation.
    pub generation: u64,
    /// The store id, hex.
    pub store_id: String,
    /// The offset after the last good commit.
    pub good_end: u64,
    /// Where damage starts, if anywhere.
    pub damage_offset: Option<u64>,
    /// The LSN expected there.
    pub damage_lsn: Option<u64>,
    /// Whether valid records follow the damage (damage in committed data, not a torn tail).
    pub damage_mid_log: bool,
    /// What is wrong there.
    pub damage_reason: Option<String>,
}

/// How far the log at `path` (with `header`) is known durable: the clean-close marker in its
/// lock file, if one of this store and generation is there (see `format::CleanClose`), else 0.
pub(crate) fn durable_floor(path: &Path, header: &FileHeader) -> u64 {
    let marker = crate::vfs::read(&format::lock_path(path)).ok();
    marker
        .as_deref()
        .and_then(format::CleanClose::decode)
        .filter(|m| m.store_id == header.store_id && m.generation == header.generation)
        .map_or(0, |m| m.end)
}

/// Whether `lsn` may follow `prev`: strictly +1, except inside a compacted prefix.
pub(crate) fn lsn_follows(prev: u64, lsn: u64, dense_from: u64) -> bool {
    if prev >= dense_from {
        lsn == prev + 1
    } else {
        lsn > prev
    }
}

pub(crate) fn describe(err: format::ParseError) -> String {
    match err {
        format::ParseError::Incomplete => "the record is cut short".to_string(),
        format::ParseError::Invalid(r) => r.to_string(),
    }
}

/// What the spot at `off` is, where the record after LSN `prev` should start but none that
/// follows does: `scan::judge`, the one rule open, refresh and `inspect` share. `ahead` when
/// a valid record of the log's future (an LSN past the next) stands there: a missing record,
/// unless a live writer was writing the spot when it was read.
pub(crate) fn judge_spot(
    src: &(impl ReadAt + ?Sized),
    off: u64,
    file_len: u64,
    (salt, dense_from, durable): (u32, u64, u64),
    prev: u64,
    ahead: bool,
) -> io::Result<Stop> {
    let follows = |lsn| lsn_follows(prev, lsn, dense_from);
    if ahead {
        let now = record_at(src, off, file_len, salt)?;
        return Ok(if now.is_some_and(follows) { Stop::Changed } else { Stop::Damage(off) });
    }
    judge(src, off, file_len, (salt, dense_from, durable), prev, &follows)
}

/// Why the record at `off` does not follow LSN `prev`: (the reason, whether it is from the
/// log's future).
pub(crate) fn not_following(prev: u64, lsn: u64) -> (String, bool) {
    if lsn > prev {
        (format!("LSN {lsn} follows LSN {prev}: a record is missing"), true)
    } else {
        (format!("a stale record (LSN {lsn}) where LSN {} belongs", prev + 1), false)
    }
}

/// What to do about damage that is not a torn tail.
pub(crate) fn mid_log_hint(display: &str) -> String {
    format!(
        "this is damage in committed data, not a torn tail; `memcommit repair {display}` can back up the \
         file and cut it there"
    )
}

/// A further check of each record whose framing, checksum and contents are good, in log order,
/// given its offset: the engine's, whether it applies to the state the records before it make.
/// An error is damage at that record.
pub type RecordCheck<'a> =
    &'a mut dyn FnMut(&format::RecordView<'_>, u64) -> std::result::Result<(), &'static str>;

/// Read a log file without opening a store and without changing it: how far it is good,
/// and where and how it is damaged, each whole record also passed through `check` when given
/// (`engine::inspect` gives the index's: what replay refuses).
pub fn inspect_file(path: &Path, mut check: Option<RecordCheck<'_>>) -> Result<Inspection> {
    let display = path.display().to_string();
    let file = crate::vfs::Open::read().open(path).map_err(|e| Error::io(&display, "open", e))?;
    let len = file.len().map_err(|e| Error::io(&display, "stat", e))?;
    let mut hb = [0u8; HEADER_LEN];
    let n = ReadAt::read_at(&file, &mut hb, 0).map_err(|e| Error::io(&display, "read", e))?;
    let mut out = Inspection {
        header_ok: false,
        header_error: None,
        records: 0,
        lsn: 0,
        bytes: len,
        generation: 0,
        store_id: String::new(),
        good_end: 0,
        damage_offset: None,
        damage_lsn: None,
        damage_mid_log: false,
        damage_reason: None,
    };
    let header = match FileHeader::decode(&hb[..n]) {
        Ok(h) => h,
        Err(reason) => {
            out.header_error = Some(reason.to_string());
            out.damage_offset = Some(0);
            out.damage_reason = Some(reason.to_string());
            out.damage_mid_log = true;
            return Ok(out);
        }
    };
    out.header_ok = true;
    out.generation = header.generation;
    out.store_id = hex(&header.store_id);
    let salt = header.salt();
    let mut sc = Scanner::new(&file, HEADER_LEN as u64, len, salt, format::MAX_PAYLOAD_LEN);
    let (mut prev, mut records, mut good_end, mut good_records) = (0u64, 0u64, HEADER_LEN as u64, 0u64);
    let mut data_end = len;
    let ids = (salt, header.dense_from, durable_floor(path, &header));
    loop {
        let (off, reason, ahead) = match sc.next_item().map_err(|e| Error::io(&display, "read", e))? {
            Item::End => break,
            Item::Record(off, rec) if !lsn_follows(prev, rec.lsn, header.dense_from) => {
                let (reason, ahead) = not_following(prev, rec.lsn);
                (off, reason, ahead)
            }
            Item::Record(off, rec) => {
                let unfit = memory::check_contents(&rec)
                    .and_then(|()| check.as_mut().map_or(Ok(()), |c| c(&rec, off)));
                if let Err(reason) = unfit {
                    // Valid framing and checksum over contents that do not decode: damage in
                    // committed data, whatever follows it.
                    out.damage_offset = Some(off);
                    out.damage_lsn = Some(rec.lsn);
                    out.damage_reason = Some(format!("{reason} {}", memory::CHECKSUM_MATCHES));
                    out.damage_mid_log = true;
                    break;
                }
                records += 1;
                prev = rec.lsn;
                if rec.closes_commit(header.dense_from) {
                    good_end = off + rec.bytes.len() as u64;
                    good_records = records;
                    out.lsn = rec.lsn;
                }
                continue;
            }
            Item::Bad(off, err) => (off, describe(err), false),
        };
        let stop =
            judge_spot(&file, off, len, ids, prev, ahead).map_err(|e| Error::io(&display, "read", e))?;
        match stop {
            Stop::Changed => sc = Scanner::new(&file, off, len, salt, format::MAX_PAYLOAD_LEN),
            Stop::FreeSpace => {
                // Space written ahead for the next commits: the data ends here.
                data_end = off;
                break;
            }
            Stop::Torn | Stop::Damage(_) => {
                out.damage_offset = Some(off);
                out.damage_lsn = Some(prev + 1);
                out.damage_reason = Some(reason);
                out.damage_mid_log = matches!(stop, Stop::Damage(_));
                break;
            }
        }
    }
    if out.damage_offset.is_none() && good_end < data_end {
        out.damage_offset = Some(good_end);
        out.damage_lsn = Some(out.lsn + 1);
        out.damage_reason = Some("a commit that never finished".to_string());
    }
    out.records = good_records;
    out.good_end = good_end;
    Ok(out)
}

/// Check the seals of the log file at `path` against its bytes, without replaying it: the
/// chain from the header over every whole record before any damage (`inspect`'s good end),
/// each seal compared with the chain at its LSN. For a log an open refuses because a record
/// does not apply (an id changed under a recomputed checksum), so that `verify` can still
/// name the seal whose range the change is in.
pub fn check_file_seals(path: &Path, key: Option<&crate::format::seal::SealKey>) -> Result<verify::Checked> {
    let display = path.display().to_string();
    // Up to the first record that does not parse or decode: one whose id was changed under a
    // recomputed checksum is in the range its seal covers, and the check names that seal.
    let inspected = inspect_file(path, None)?;
    if !inspected.header_ok {
        return Err(Error::Corrupt {
            path: display,
            offset: 0,
            lsn: 0,
            reason: inspected.header_error.unwrap_or_else(|| "the header does not parse".into()),
        });
    }
    let file = crate::vfs::Open::read().open(path).map_err(|e| Error::io(&display, "open", e))?;
    let mut hb = [0u8; HEADER_LEN];
    ReadAt::read_at(&file, &mut hb, 0).map_err(|e| Error::io(&display, "read", e))?;
    let header = FileHeader::decode(&hb).map_err(|reason| Error::Corrupt {
        path: display.clone(),
        offset: 0,
        lsn: 0,
        reason: reason.to_string(),
    })?;
    let source = verify::Source {
        src: &file,
        salt: header.salt(),
        dense_from: header.dense_from,
        end: inspected.good_end,
        version: header.version,
    };
    let start = verify::Start { offset: HEADER_LEN as u64, value: format::chain::start(&hb), lsn: 0 };
    verify::check(&source, start, verify::CheckOptions { key, ..Default::default() }).map_err(|f| {
        f.into_error(&display, |offset, lsn, reason| Error::Corrupt {
            path: display.clone(),
            offset,
            lsn,
            reason,
        })
    })
}
