//! Tessera engine.
pub mod sampling;
pub mod stop;
pub mod tokenizer;
pub mod chat_template;
