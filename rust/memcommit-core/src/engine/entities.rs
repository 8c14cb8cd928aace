//! The agent-runtime roles' entities in the log.
//!
//! The roles (runs, locks, checkpoints...) keep their state as entities: a JSON object per
//! `(kind, key)`, always written whole. Each change is an `Entity` record whose key is the
//! entity's key and whose payload is its new state (or its removal), so the log's last record
//! for a key is the entity, and the index keeps where that record is. A batch of changes is
//! one commit: all of it or none.

use crate::engine::commit::Committed;
use crate::engine::log::Log;
use crate::engine::state::State;
use crate::error::{Error, Result};
use crate::format::memory;
use crate::format::{self, Op, MAX_KEY_LEN};

impl Log {
    /// Append `changes` (key, new state as JSON, or `None` to remove) as one commit, without
    /// waiting for durability (see `wait_durable`). Returns what the commit wrote.
    pub fn write_entities(&self, changes: &[(&str, Option<&[u8]>)], at: i64) -> Result<Option<Committed>> {
        for (key, state) in changes {
            if key.is_empty() || key.len() > MAX_KEY_LEN {
                return Err(Error::invalid(
                    "key",
                    format!("an entity key must be 1 to {MAX_KEY_LEN} bytes, not {}", key.len()),
                ));
            }
            if let Some(json) = state {
                if json.is_empty() || json.len() + 1 > self.opts.max_record_bytes {
                    return Err(Error::invalid(
                        "state",
                        format!(
                            "the state of {key:?} is {} bytes; an entity's state must be 1 to {} bytes",
                            json.len(),
                            self.opts.max_record_bytes - 1
                        ),
                    ));
                }
            }
        }
        let mut c = self.begin(None, at, 0)?;
        for (key, state) in changes {
            c.push_raw(Op::Entity, key.as_bytes(), |o| memory::encode_entity(o, *state))?;
        }
        c.finish()
    }

    /// A number that changes whenever an entity may have changed (entity records applied).
    pub fn entity_version(&self) -> u64 {
        self.state.read().index.entity_records()
    }

    /// Every live entity: (key, state as JSON), in key order.
    pub fn entities(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let mut buf = Vec::new();
        st.index
            .entities()
            .map(|(key, place)| {
                let json = self.read_entity(&st, place, &mut buf)?;
                Ok((String::from_utf8_lossy(key).into_owned(), json.to_vec()))
            })
            .collect()
    }

    /// The state of entity `key` as JSON, if it is live.
    pub fn entity(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.entities_of(&[key])?.pop().flatten())
    }

    /// The states of entities `keys` as JSON (None for each one not live), in their order.
    pub fn entities_of(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let mut buf = Vec::new();
        keys.iter()
            .map(|key| match st.index.entity(key) {
                Some(place) => Ok(Some(self.read_entity(&st, place, &mut buf)?.to_vec())),
                None => Ok(None),
            })
            .collect()
    }

    /// The keys of the live entities whose key starts with `prefix`, in key order (reads no
    /// record).
    pub fn entity_keys(&self, prefix: &[u8]) -> Result<Vec<String>> {
        self.entity_keys_after(prefix, None, usize::MAX)
    }

    /// `entity_keys`, at most `limit` of them, those after `after` (when given): a walk of the
    /// keys under a prefix, a page at a time.
    pub fn entity_keys_after(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(st
            .index
            .entities_under_after(prefix, after)
            .take(limit)
            .map(|(key, _)| String::from_utf8_lossy(key).into_owned())
            .collect())
    }

    /// How many live entities have a key that starts with `prefix`.
    pub fn entity_count(&self, prefix: &[u8]) -> Result<u64> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(if prefix.is_empty() { st.index.entities.len() } else { st.index.entities_under(prefix).count() }
            as u64)
    }

    /// The state in the entity record at `(off, len)`, read into `buf`.
    fn read_entity<'b>(&self, st: &State, (off, len): (u64, u32), buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
        buf.resize(len as usize, 0);
        let n = st.medium.source().read_at(buf, off).map_err(|e| Error::io(self.display(), "read", e))?;
        let damaged = || Error::Corrupt {
            path: self.display().to_string(),
            offset: off,
            lsn: 0,
            reason: "an entity record no longer reads back as it was written".into(),
        };
        if n < buf.len() {
            return Err(damaged());
        }
        let rec =
            format::parse_record(buf, st.header.salt(), format::MAX_PAYLOAD_LEN).map_err(|_| damaged())?;
        memory::decode_entity(rec.payload).flatten().ok_or_else(damaged)
    }
}
