//! The state replay builds and the writer keeps: the index of memories, entities and seals
//! (with its id table and the slabs they sit in). Built from `format` and `recovery` only.

pub(crate) mod idtable;
pub(crate) mod index;
pub(crate) mod slab;
