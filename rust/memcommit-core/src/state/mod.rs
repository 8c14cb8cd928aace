//! The state replay builds and the writer keeps: the index of memories (with its id table and
//! the slabs they sit in) and the seals' payload and chain check. Built from `format` and
//! `recovery` only; it knows nothing of files being open or written.

pub(crate) mod idtable;
pub(crate) mod index;
pub(crate) mod seal;
pub(crate) mod slab;
