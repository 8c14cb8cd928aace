//! memcommit's core: an append-only, LSN-numbered log of memory records, the index its replay
//! builds, and the hash chain over it. Pure Rust; the Python binding lives in `memcommit-py`.

#![warn(missing_docs)]

pub mod appender;
pub mod chain;
pub mod chainer;
pub mod commit;
pub mod compact;
pub mod entities;
pub mod error;
pub mod format;
pub mod ids;
pub mod idtable;
pub mod index;
pub mod index_file;
pub mod log;
pub mod memory;
mod recovery;
pub mod replica;
pub mod scan;
pub mod seal;
mod slab;
pub mod snapshot;

pub use commit::{Commit, Committed};
pub use error::{Error, GuardKind, GuardValue, Rejection, Result};
pub use index::{Entry, Query};
pub use log::{truncate, Durability, Log, LogInfo, MemoryRead, Options};
pub use memory::{Command, Expect, PutCommand, Status, Tier};
pub use recovery::{inspect, Inspection};
