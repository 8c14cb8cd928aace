//! The state replay builds and the writer keeps: the index of memories, entities and seals
//! (with its id table, where each memory's older records are, and the slabs they sit in).
//! Built from `format` and `recovery` only.

pub(crate) mod by_task;
pub(crate) mod history;
pub(crate) mod idtable;
pub(crate) mod index;
pub(crate) mod room;
pub(crate) mod slab;
