//! The engine: an open log. Open and refresh (`log`, `replay`), the commit path (`commit`), the write
//! queue with group commit and the platform's syncs (`appender`), reads, the chain thread
//! (`chainer`), seals and entities on an open log, saving the state (`persist`), a replica's apply (`replica`), search (`search`),
//! and the generation swap of log compaction (`generation`).

pub(crate) mod appender;
pub(crate) mod chainer;
pub(crate) mod commit;
pub(crate) mod entities;
pub(crate) mod generation;
pub(crate) mod log;
pub(crate) mod persist;
pub(crate) mod replay;
pub(crate) mod replica;
pub(crate) mod seal;
pub(crate) mod search;
pub(crate) mod state;
