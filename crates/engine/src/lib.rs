//! Tessera engine.
