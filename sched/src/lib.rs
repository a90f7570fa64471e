//! Work-stealing workers over indexed tasks, with a token-passing ordered consumer.
//! (Filled in by the engine issue.)
#![forbid(unsafe_code)]
#![deny(missing_docs)]
