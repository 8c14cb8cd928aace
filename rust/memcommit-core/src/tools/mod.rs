//! Offline and whole-log tools: compaction into a new generation. (`inspect` is recovery's
//! classifier run on a closed file; `truncate` cuts a torn tail: both are re-exported at the
//! crate root.)

pub(crate) mod compact;
