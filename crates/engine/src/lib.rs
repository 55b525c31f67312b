//! Tessera engine.
pub mod sampling;
pub mod stop;
