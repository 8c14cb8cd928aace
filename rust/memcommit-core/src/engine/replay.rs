//! Replay: applying a log's records onto the state, at open and at a reader's refresh. Where
//! no record follows, `recovery::judge_spot` says what the spot is, the same rule `inspect`
//! uses.

use std::path::Path;

use crate::engine::state::{State, SPARSE_EVERY};
use crate::error::{Error, Result};
use crate::format;
use crate::recovery::scan::{Item, Scanner, Stop};
use crate::recovery::{
    describe, inspect_file, judge_spot, lsn_follows, mid_log_hint, not_following, Inspection,
};
use crate::state::index::Index;

/// How many bytes of records replay applies between two calls of its `between`.
const STEP: u64 = 4 << 20;

/// Read a log file without opening a store and without changing it (`recovery::inspect_file`):
/// how far it is good, and where and how it is damaged. Damage is what an open refuses: a
/// record that does not parse, does not decode, or does not apply to the state the records
/// before it make (a status record of a memory the log never created), so that `repair`
/// finds what an open names.
pub fn inspect(path: &Path) -> Result<Inspection> {
    let mut index = Index::new();
    inspect_file(path, Some(&mut |rec, off| index.apply(rec, off, None)))
}

/// Apply records from `start` to `file_len` onto the state. Records of a commit that did not
/// finish are taken back. Damage followed by any valid record is `Corrupt`. `between` is
/// called every [`STEP`] bytes or so; an error from it stops the replay at the last whole
/// commit applied, as if the log ended there, and is returned (a reader's state is then
/// whole, only behind). Returns the offset after the last complete commit.
pub(crate) fn replay(
    st: &mut State,
    start: u64,
    file_len: u64,
    display: &str,
    between: &mut dyn FnMut() -> Result<()>,
) -> Result<u64> {
    let salt = st.header.salt();
    let (dense_from, durable) = (st.header.dense_from, st.durable_floor);
    let State { medium, index, undo, sparse, .. } = st;
    let src = medium.source();
    let mut sc = Scanner::new(src, start, file_len, salt, format::MAX_PAYLOAD_LEN);
    let mut prev = st.lsn;
    let mut good_end = start;
    let (mut committed_lsn, mut committed_records, mut records) = (st.lsn, st.records, st.records);
    undo.clear();
    let mut mark = index.mark();
    let ids = (salt, dense_from, durable);
    let mut next_step = start + STEP;
    let mut stopped = None;
    loop {
        let (item, next_key) = sc.next_with_lookahead().map_err(|e| Error::io(display, "read", e))?;
        // The id table's slot for the next record is a likely cache miss: start loading it now,
        // while this record is applied.
        if !next_key.is_empty() {
            index.prefetch(next_key);
        }
        let (off, reason, ahead) = match item {
            Item::End => break,
            Item::Record(off, rec) if !lsn_follows(prev, rec.lsn, dense_from) => {
                let (reason, ahead) = not_following(prev, rec.lsn);
                (off, reason, ahead)
            }
            Item::Record(off, rec) => {
                if off >= next_step {
                    if let Err(e) = between() {
                        stopped = Some(e);
                        break;
                    }
                    next_step = off + STEP;
                }
                index.apply(&rec, off, Some(undo)).map_err(|reason| Error::Corrupt {
                    path: display.to_string(),
                    offset: off,
                    lsn: rec.lsn,
                    reason: format!(
                        "{reason}: the record's checksum matches, but it does not decode or does not fit \
                         the records before it: {}",
                        mid_log_hint(display)
                    ),
                })?;
                if records.is_multiple_of(SPARSE_EVERY) {
                    sparse.push((rec.lsn, off));
                }
                records += 1;
                prev = rec.lsn;
                if rec.closes_commit(dense_from) {
                    undo.clear();
                    mark = index.mark();
                    good_end = off + rec.bytes.len() as u64;
                    committed_lsn = rec.lsn;
                    committed_records = records;
                }
                continue;
            }
            Item::Bad(off, err) => (off, describe(err), false),
        };
        match judge_spot(src, off, file_len, ids, prev, ahead).map_err(|e| Error::io(display, "read", e))? {
            Stop::FreeSpace | Stop::Torn => break,
            Stop::Changed => sc = Scanner::new(src, off, file_len, salt, format::MAX_PAYLOAD_LEN),
            Stop::Damage(later) => {
                let evidence = if later == off {
                    String::new()
                } else {
                    format!(" and a valid record follows at byte {later}")
                };
                return Err(Error::Corrupt {
                    path: display.to_string(),
                    offset: off,
                    lsn: prev + 1,
                    reason: format!("{reason}{evidence}: {}", mid_log_hint(display)),
                });
            }
        }
    }
    index.rollback(mark, undo);
    sparse.retain(|&(_, off)| off < good_end);
    st.lsn = committed_lsn;
    st.records = committed_records;
    st.end = good_end;
    match stopped {
        Some(e) => Err(e),
        None => Ok(good_end),
    }
}
