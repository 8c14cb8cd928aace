//! The one error type of the core. The binding maps each variant to one Python exception.

use std::fmt;
use std::io;

/// Which guard refused a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// The store's head LSN was not the expected one.
    ExpectLsn,
    /// The memory existed when it should not, or the other way round.
    Exists,
    /// The memory's status differed.
    Status,
    /// The memory's tier differed.
    Tier,
    /// The memory's LSN differed (compare-and-set).
    Lsn,
    /// The operation names a memory the store does not have.
    UnknownId,
}

impl GuardKind {
    /// The guard's name as users see it.
    pub fn name(self) -> &'static str {
        match self {
            GuardKind::ExpectLsn => "expect_lsn",
            GuardKind::Exists => "exists",
            GuardKind::Status => "status",
            GuardKind::Tier => "tier",
            GuardKind::Lsn => "lsn",
            GuardKind::UnknownId => "unknown_id",
        }
    }
}

/// What a guard asked for, or what the store had, in its own type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardValue {
    /// An LSN (`expect_lsn`, the `lsn` guard).
    Lsn(u64),
    /// Whether the memory exists.
    Exists(bool),
    /// The memory was purged by retention (it does not exist, and never will again).
    Purged,
    /// A status.
    Status(crate::format::memory::Status),
    /// A tier.
    Tier(crate::format::memory::Tier),
}

/// A refused commit: which guard, on what, expected and found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The guard.
    pub kind: GuardKind,
    /// The memory it is about, if any.
    pub id: Option<String>,
    /// What the guard asked for.
    pub expected: GuardValue,
    /// What the store had.
    pub actual: GuardValue,
    /// A sentence for the user: what the guard asked of the memory and what it found.
    pub reason: String,
}

impl Rejection {
    /// A refusal of `kind` about memory `id` (or the store, for `expect_lsn`), its sentence
    /// composed from the typed values.
    pub fn new(kind: GuardKind, id: Option<&str>, expected: GuardValue, actual: GuardValue) -> Rejection {
        use GuardValue as V;
        let what = match (kind, expected, actual) {
            (GuardKind::ExpectLsn, V::Lsn(want), V::Lsn(have)) => {
                return Rejection {
                    kind,
                    id: id.map(str::to_string),
                    expected,
                    actual,
                    reason: if want > have {
                        format!(
                            "the store's LSN is {have} but the commit expected {want}: the store has \
                             not reached that LSN (one read from another store, or a later state?); \
                             read the store's lsn again"
                        )
                    } else {
                        format!(
                            "the store's LSN is {have} but the commit expected {want}: another commit \
                             came first; read again and retry"
                        )
                    },
                };
            }
            (_, _, V::Purged) => {
                "it was purged by a retention policy during log compaction (see store.manifest())".to_string()
            }
            (GuardKind::UnknownId, ..) => "the store has no memory with that id".to_string(),
            (_, V::Exists(true), _) => {
                "the commit expects it to exist, but the store has no memory with that id".to_string()
            }
            (_, V::Exists(false), _) => {
                "the commit expects no memory with that id, but one exists".to_string()
            }
            (_, V::Status(want), V::Status(have)) => {
                format!("the commit expects status {}, but it is {}", want.name(), have.name())
            }
            (_, V::Tier(want), V::Tier(have)) => {
                format!("the commit expects tier {}, but it is in tier {}", want.name(), have.name())
            }
            (_, V::Lsn(want), V::Lsn(have)) => format!(
                "the commit expects its newest record at LSN {want}, but that is at LSN {have} (another \
                 commit changed it: read it again and retry)"
            ),
            (_, want, have) => format!("the commit expects {want:?}, but found {have:?}"),
        };
        let who = id.unwrap_or_default();
        let reason = match kind {
            GuardKind::UnknownId => format!("cannot change memory {who:?}: {what}; nothing was written"),
            _ => format!("guard failed on memory {who:?}: {what}; nothing was written"),
        };
        Rejection { kind, id: id.map(str::to_string), expected, actual, reason }
    }
}

/// Everything that can go wrong in the core.
#[derive(Debug)]
pub enum Error {
    /// An I/O call failed.
    Io {
        /// The file involved.
        path: String,
        /// What was being done.
        action: &'static str,
        /// The OS error.
        source: io::Error,
        /// When the disk was full: about how many more bytes of free space the operation
        /// needed (at most).
        needed: Option<u64>,
    },
    /// A write or fsync failed earlier; the writer stopped and must be reopened.
    WriterFailed {
        /// The log file.
        path: String,
        /// What failed.
        reason: String,
        /// The OS error number of the failure, if it had one.
        errno: Option<i32>,
    },
    /// Another writer holds the log.
    Locked {
        /// The log file.
        path: String,
    },
    /// Damage inside committed data (not a torn tail), or a file that is not a log.
    Corrupt {
        /// The log file.
        path: String,
        /// Byte offset of the damaged record.
        offset: u64,
        /// The LSN expected there.
        lsn: u64,
        /// What is wrong, and what the user can do about it.
        reason: String,
    },
    /// The hash chain recomputed from the log disagrees with a seal.
    SealMismatch {
        /// The log file.
        path: String,
        /// LSN of the seal record that disagrees.
        lsn: u64,
        /// Byte offset of that seal record.
        offset: u64,
        /// LSN of the last seal before it that matched (0 for none): the change lies after it.
        after_lsn: u64,
        /// What disagrees.
        reason: String,
    },
    /// A memory refers (in `sources`) to an id the log never held and no compaction purged.
    ForgedReference {
        /// The log file.
        path: String,
        /// The id referred to.
        id: String,
        /// The memory that refers to it.
        by: String,
        /// LSN of the put that refers to it.
        lsn: u64,
        /// Byte offset of that put.
        offset: u64,
    },
    /// A snapshot that does not belong to the log it was opened with.
    SnapshotMismatch {
        /// The snapshot file (the log's, for a snapshot given as text).
        path: String,
        /// What does not match.
        reason: String,
    },
    /// A commit refused by a guard.
    Rejected(Rejection),
    /// Bad input from the caller; nothing was written.
    Invalid {
        /// The argument involved.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The store was closed.
    Closed {
        /// The log file, or ":memory:".
        path: String,
        /// Why, when it was not closed by its owner (log compaction replaced it).
        why: Option<String>,
    },
    /// A write on a read-only store.
    ReadOnly {
        /// The log file.
        path: String,
    },
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: &str, action: &'static str, source: io::Error) -> Error {
        Error::Io { path: path.to_string(), action, source, needed: None }
    }

    /// `io`, saying when the disk was full that the operation needed up to `needed` more
    /// bytes of free space.
    pub(crate) fn io_needing(path: &str, action: &'static str, source: io::Error, needed: u64) -> Error {
        let needed = crate::vfs::no_space(&source).then_some(needed);
        Error::Io { path: path.to_string(), action, source, needed }
    }

    /// The OS error number behind an I/O error or a failed writer, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            Error::WriterFailed { errno, .. } => *errno,
            _ => None,
        }
    }

    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Error {
        Error::Invalid { field, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, action, source, needed } => {
                write!(f, "{action} {path}: {source}")?;
                match needed {
                    Some(n) => write!(f, "; {}", space_needed("up to", *n)),
                    None => Ok(()),
                }
            }
            Error::WriterFailed { path, reason, .. } => write!(
                f,
                "the writer of {path} stopped after an I/O failure ({reason}); nothing after it was acknowledged. \
                 Close the store and open it again to recover from what is on disk"
            ),
            Error::Locked { path } => write!(
                f,
                "{path} is open for writing by another store (in this process or another); \
                 close it first, or open with read_only=True"
            ),
            Error::Corrupt { path, offset, lsn, reason } => {
                write!(f, "{path}: damaged log at byte offset {offset} (LSN {lsn}): {reason}")
            }
            Error::SealMismatch { path, lsn, offset, reason, .. } => write!(
                f,
                "{path}: the seal at LSN {lsn} (byte offset {offset}) does not match the log: {reason}"
            ),
            Error::ForgedReference { path, id, by, lsn, offset } => write!(
                f,
                "{path}: memory {by:?} (LSN {lsn}, byte offset {offset}) lists {id:?} among its sources, \
                 but the log never held that id and no compaction purged it"
            ),
            Error::SnapshotMismatch { path, reason } => write!(
                f,
                "{path}: the snapshot does not match the log: {reason}. Open without the snapshot \
                 (a full replay), or save a new one with store.save_snapshot()"
            ),
            Error::Rejected(r) => write!(f, "{}", r.reason),
            Error::Invalid { field, message } => write!(f, "{field}: {message}"),
            Error::Closed { path, why: None } => write!(f, "the store {path} is closed"),
            Error::Closed { path, why: Some(why) } => write!(f, "the store {path} is closed: {why}"),
            Error::ReadOnly { path } => write!(f, "the store {path} is open read-only; open it without read_only to write"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a full disk's error adds: how much more free space the operation needs, `up to` (an
/// upper bound) or `at least` (the part that failed, of a commit written in pieces).
pub(crate) fn space_needed(bound: &str, bytes: u64) -> String {
    format!(
        "the disk is full: this needs {bound} {bytes} more bytes ({:.1} MiB) of free space",
        bytes as f64 / (1u64 << 20) as f64
    )
}
