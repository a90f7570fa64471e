//! A bump arena owning everything parsed from one compile unit.
//!
//! Dropping the arena frees the whole unit in one step. (Filled in by the engine issue.)
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use bumpalo::Bump;

/// One compile unit's memory.
#[derive(Default)]
pub struct CuArena {
    bump: Bump,
}

impl CuArena {
    /// A new, empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// The allocator to build the unit's data in.
    pub fn bump(&self) -> &Bump {
        &self.bump
    }

    /// Bytes the arena has taken from the system.
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }
}
