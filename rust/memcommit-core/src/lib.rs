//! memcommit's core: an append-only, LSN-numbered log of memory records, the index its replay
//! builds, and the hash chain over it. Pure Rust; the Python binding lives in `memcommit-py`.
//!
//! The modules are layered, each using only those listed before it:
//!
//! * `vfs`: the file layer, the one place file operations happen (with the
//!   `fault-injection` feature, also the simulated file system of the fault tests: [`sim`]).
//! * [`ids`]: generated ids.
//! * [`format`](mod@format): the byte format: file header, record framing, payloads
//!   ([`format::memory`], [`format::seal`]) and the hash chain ([`format::chain`]). Public:
//!   it is the on-disk contract.
//! * [`error`]: the one error type (its guard values hold `format`'s statuses and tiers).
//! * `recovery`: chunked reading (`scan`), the one rule that tells a torn tail, free space and
//!   damage apart (used by open, refresh, replica apply, [`inspect`] and repair), and the seal
//!   check (`verify`).
//! * `state`: the index replay builds, its id table, the links of older records and slabs.
//! * [`search`]: vector and full-text search structures (the filter is the index's).
//! * `persist`: the index file's and the snapshot's bytes.
//! * `engine`: an open [`Log`]: open, replay, commit, durability, reads, the chain thread,
//!   seals, entities, saving the state, a replica.
//! * `tools`: compaction into a new generation.
//!
//! Only what is re-exported here (and in the small modules below) is the crate's API.

#![warn(missing_docs)]

mod engine;
pub mod error;
pub mod format;
pub mod ids;
mod persist;
mod recovery;
pub mod search;
mod state;
mod tools;
mod vfs;

/// The simulated file system the fault tests run the engine on (see `vfs::sim`).
#[cfg(feature = "fault-injection")]
pub mod sim {
    pub use crate::vfs::sim::{Crash, Fault, Op, Rng, SimFs};
}

pub use engine::commit::{Commit, Committed, PutRun};
pub use engine::log::{
    truncate, truncate_expecting, AutoSeal, Durability, Log, LogInfo, MemoryRead, Options,
};
pub use engine::replay::inspect;
pub use engine::search::SearchQuery;
pub use error::{Error, GuardKind, GuardValue, Rejection, Result};
pub use format::memory::{Command, Expect, PutCommand, Status, Tier};
pub use recovery::{check_file_seals, Inspection};
pub use state::index::{Entry, Query};
pub use state::room::Room;

/// Opening and writing logs: the options, the automatic seal policy, and a shorthand command.
pub mod log {
    pub use crate::engine::log::{put, AutoSeal, Durability, Log, LogInfo, MemoryRead, Options};
}

/// Seals: the payload, its key and mac, and what a check of the chain reports.
pub mod seal {
    pub use crate::format::hex;
    pub use crate::format::seal::{decode, derive_key, encode_payload, mac, SealEntry, SealKey, SEAL_WINDOW};
    pub use crate::recovery::verify::Checked;
}

/// Compaction: what to keep, what a compaction did, and the hooks that watch and stop it.
pub mod compact {
    pub use crate::tools::compact::{Compacted, Hooks, Plan, Retention};
}

/// The index file beside a log: where it lives and what open made of it.
pub mod index_file {
    pub use crate::persist::index_file::{path_for, IndexFileStatus};
}
