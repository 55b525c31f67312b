//! What one render of an untrusted template may cost. A GGUF's `tokenizer.chat_template` is code
//! from whoever made the file, and rendering runs on every chat request, so a hostile template
//! must fail fast with [`ChatTemplateError::Limit`](super::ChatTemplateError::Limit) instead
//! of looping, recursing, growing values or writing without end:
//!
//! - the source is at most [`MAX_SOURCE_BYTES`] (compiling costs time and memory in its size);
//! - fuel: every minijinja instruction costs one, a render gets [`FUEL_BASE`] plus
//!   [`FUEL_PER_MESSAGE`] per message ([`fuel`]; real templates need a hundredth of it);
//! - recursion depth [`RECURSION_LIMIT`] (minijinja's units: a loop or `if` 1, a macro call 4);
//! - work: every byte a render makes, reads, compares or writes is charged to a budget of
//!   [`WORK_BASE_BYTES`] plus [`WORK_PER_CONTENT_BYTE`] per byte of the messages and
//!   [`WORK_PER_CONTENT_BYTE_AND_MESSAGE`] per byte and message ([`work_budget`]), and no
//!   value may exceed the output cap ([`value_cap`]): one
//!   instruction can copy a whole string, so fuel alone would let `s ~ s` double it until
//!   memory runs out ([`super::budget`] instruments the compiled template to charge it), nor
//!   nest containers deeper than [`MAX_NESTING`] (dropping or writing one recurses per level);
//! - the rendered text is at most [`OUTPUT_BASE_BYTES`] plus [`OUTPUT_PER_CONTENT_BYTE`] times
//!   the messages' bytes ([`output_cap`]);
//! - the builtins that turn a small number into a large allocation refuse widths above
//!   [`MAX_WIDTH`] (`indent`, `tojson(indent=..)`, `format` and `str.format` paddings) and
//!   ranges above [`MAX_RANGE`] items; `join`, `replace` and `indent` refuse results past the
//!   value cap before making them ([`super::guards`]).
//!
//! What remains: one operation may allocate before its result is charged, at most a few times
//! the value cap (minijinja's own `'x' * n` cap is 100 MB), once.

use minijinja::{Error, ErrorKind};

/// Longest template source (1 MiB). The largest of llama.cpp's collection of 70 real templates
/// is 17 KiB; anything far larger is garbage or an attack.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// Fuzz builds (cargo-fuzz's `cfg(fuzzing)`) divide the budgets of time and output by this: a
/// hostile template then ends on the same checks ten times sooner, so the fuzzer tries ten
/// times more of them, while real templates stay far under every budget.
const FUZZ_DIVISOR: u64 = if cfg!(fuzzing) { 10 } else { 1 };

/// Instructions any render may run, whatever the conversation (a few milliseconds). Real
/// templates spend 150 to 1,200 on a five-message conversation.
pub const FUEL_BASE: u64 = 250_000 / FUZZ_DIVISOR;

/// Instructions allowed per message on top of [`FUEL_BASE`], so that long conversations render:
/// real templates spend 40 to 160 per message, and Gemma 4's looks back over the conversation
/// at each message (622,000 for 400 messages; the allowance is 4.25 million).
pub const FUEL_PER_MESSAGE: u64 = 10_000 / FUZZ_DIVISOR;

/// Recursion depth in minijinja's units. Real templates nest a few loops and conditions and
/// at most a handful of macro calls (JSON-schema renderers); minijinja's own ceiling is 500.
pub const RECURSION_LIMIT: usize = 200;

/// Rendered bytes any render may write (1 MiB), whatever the conversation.
pub const OUTPUT_BASE_BYTES: usize = (1 << 20) / FUZZ_DIVISOR as usize;

/// Rendered bytes allowed per byte of the messages' contents on top of [`OUTPUT_BASE_BYTES`]:
/// templates write each message once, some twice (a system prompt repeated in a tool turn).
pub const OUTPUT_PER_CONTENT_BYTE: usize = 4;

/// Bytes of work any render may do (8 MiB): every byte of a string it makes, reads, compares or
/// writes, and every item of a container, counts ([`super::budget`]). llama.cpp's real
/// templates spend 16 to 220 KiB on a five-message conversation of 5 KiB.
pub const WORK_BASE_BYTES: u64 = (8 << 20) / FUZZ_DIVISOR;

/// Bytes of work allowed per byte of the messages' contents on top of [`WORK_BASE_BYTES`].
pub const WORK_PER_CONTENT_BYTE: u64 = 64;

/// Bytes of work allowed per byte of content and per message: templates that build their
/// output in a namespace string (`ns.out = ns.out ~ ...`) copy it once per message, which is
/// quadratic (Reka-Edge's spends 1.6 times messages times bytes; the allowance is 4).
pub const WORK_PER_CONTENT_BYTE_AND_MESSAGE: u64 = 4;

/// Deepest nesting of containers a template may make (see [`super::budget`]).
pub use super::budget::MAX_NESTING;

/// Largest width a template may ask of `indent`, `tojson(indent=..)` or a format padding.
pub const MAX_WIDTH: u64 = 256;

/// Most items `range()` gives (Jinja's sandbox and minijinja's own limit).
pub const MAX_RANGE: usize = 100_000;

/// Marks errors raised by the guards below, so that they surface as `Limit`.
pub(super) const LIMIT: &str = "tessera limit: ";

/// The fuel of a render of `n_messages` messages.
pub fn fuel(n_messages: usize) -> u64 {
    FUEL_BASE.saturating_add(FUEL_PER_MESSAGE.saturating_mul(n_messages as u64))
}

/// The output cap of a render whose messages' contents hold `content_bytes` bytes.
pub fn output_cap(content_bytes: usize) -> usize {
    OUTPUT_BASE_BYTES.saturating_add(OUTPUT_PER_CONTENT_BYTE.saturating_mul(content_bytes))
}

/// The work budget of a render of `n_messages` messages whose contents hold `content_bytes`.
pub fn work_budget(n_messages: usize, content_bytes: usize) -> u64 {
    let bytes = content_bytes as u64;
    let per_message = WORK_PER_CONTENT_BYTE_AND_MESSAGE.saturating_mul(n_messages as u64);
    WORK_BASE_BYTES
        .saturating_add(WORK_PER_CONTENT_BYTE.saturating_mul(bytes))
        .saturating_add(per_message.saturating_mul(bytes))
}

/// The largest value (string bytes, or items and bytes of a container) a render may make: the
/// output cap, since anything larger could not be written anyway.
pub fn value_cap(content_bytes: usize) -> u64 {
    output_cap(content_bytes) as u64
}

pub(super) fn limit_error(msg: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("{LIMIT}{msg}"))
}
