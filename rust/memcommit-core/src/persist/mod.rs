//! What the state is saved as besides the log: the index file (opened in place of a replay)
//! and the snapshot (the state as JSON, for a copy opened elsewhere).

pub(crate) mod index_file;
pub(crate) mod snapshot;
