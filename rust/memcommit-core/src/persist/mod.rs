//! What the state is saved as besides the log: the index file (opened in place of a replay)
//! and the snapshot (the state as JSON, for a copy opened elsewhere).

pub(crate) mod index_file;
pub(crate) mod snapshot;

use crate::format::chain::ChainValue;
use crate::format::FileHeader;

/// Where the log stood when its state was saved: the index file and the snapshot both record
/// it, and check it against the log when they are read back.
#[derive(Clone, Copy)]
pub(crate) struct SavedAt {
    pub(crate) header: FileHeader,
    /// The last LSN and the chain value through it.
    pub(crate) lsn: u64,
    pub(crate) chain: ChainValue,
    /// The offset after the last commit, and the records before it.
    pub(crate) end: u64,
    pub(crate) records: u64,
    /// The last record's offset and digest (`None` for an empty log).
    pub(crate) last: Option<(u64, ChainValue)>,
}
