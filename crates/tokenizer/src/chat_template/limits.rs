//! What one render of an untrusted template may cost. A GGUF's `tokenizer.chat_template` is code
//! from whoever made the file, and rendering runs on every chat request, so a hostile template
//! must fail fast with [`ChatTemplateError::Limit`](super::ChatTemplateError::Limit) instead
//! of looping, recursing or writing without end:
//!
//! - the source is at most [`MAX_SOURCE_BYTES`] (compiling costs time and memory in its size);
//! - fuel: every minijinja instruction costs one, a render gets [`FUEL_BASE`] plus
//!   [`FUEL_PER_MESSAGE`] per message ([`fuel`]; real templates need a thousandth of it);
//! - recursion depth [`RECURSION_LIMIT`] (minijinja's units: a loop or `if` 1, a macro call 4);
//! - the rendered text is at most [`OUTPUT_BASE_BYTES`] plus [`OUTPUT_PER_CONTENT_BYTE`] times
//!   the messages' bytes ([`output_cap`]), checked as it is written;
//! - the builtins that turn a small number into a large allocation refuse widths above
//!   [`MAX_WIDTH`] (`indent`, `tojson(indent=..)`, `format` and `str.format` paddings) and
//!   ranges above [`MAX_RANGE`] items.
//!
//! Not covered: minijinja has no hook on the values a template builds without writing them,
//! so a string concatenated with itself a few dozen times, or repeated (`'x' * n`, which
//! minijinja itself caps at 100 MB) in a loop, still costs memory or time before any limit
//! sees it; fuel bounds how many such steps run, the output cap whatever reaches the
//! rendering. The process's own limits (the OS, the browser tab) are the backstop there, as
//! Jinja's maintainers advise for its sandbox.

use std::io;

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// Longest template source (1 MiB). The largest of llama.cpp's collection of 70 real templates
/// is 17 KiB; anything far larger is garbage or an attack.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// Instructions any render may run, whatever the conversation (a few milliseconds). Real
/// templates spend 150 to 1,200 on a five-message conversation.
pub const FUEL_BASE: u64 = 250_000;

/// Instructions allowed per message on top of [`FUEL_BASE`], so that long conversations render:
/// real templates spend 40 to 160 per message, and Gemma 4's looks back over the conversation
/// at each message (622,000 for 400 messages; the allowance is 4.25 million).
pub const FUEL_PER_MESSAGE: u64 = 10_000;

/// Recursion depth in minijinja's units. Real templates nest a few loops and conditions and
/// at most a handful of macro calls (JSON-schema renderers); minijinja's own ceiling is 500.
pub const RECURSION_LIMIT: usize = 200;

/// Rendered bytes any render may write (1 MiB), whatever the conversation.
pub const OUTPUT_BASE_BYTES: usize = 1 << 20;

/// Rendered bytes allowed per byte of the messages' contents on top of [`OUTPUT_BASE_BYTES`]:
/// templates write each message once, some twice (a system prompt repeated in a tool turn).
pub const OUTPUT_PER_CONTENT_BYTE: usize = 4;

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

pub(super) fn limit_error(msg: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("{LIMIT}{msg}"))
}

/// The rendering, refusing to grow past its cap (the render then fails with a write error that
/// [`super::classify`] reports as a limit).
pub(super) struct Bounded {
    pub buf: Vec<u8>,
    pub cap: usize,
}

impl io::Write for Bounded {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            return Err(io::Error::other("output cap"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Replaces the builtins that allocate in proportion to a number argument with checked ones.
pub(super) fn install_guards(env: &mut minijinja::Environment<'static>) {
    env.add_function("range", range);
    guard_filter(env, "indent", minijinja::filters::indent);
    guard_filter(env, "tojson", minijinja::filters::tojson);
    let format = Value::from_function(minijinja::filters::format);
    env.add_filter("format", move |state: &State, args: Rest<Value>| {
        check_format(args.first())?;
        format.call(state, &args)
    });
    env.set_unknown_method_callback(|state, value, method, args| {
        if method == "format" {
            check_format(Some(value))?;
        }
        minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
    });
}

/// minijinja's `range` with a typed limit error.
fn range(lower: i64, upper: Option<i64>, step: Option<i64>) -> Result<Value, Error> {
    let (start, end) = match upper {
        Some(upper) => (lower, upper),
        None => (0, lower),
    };
    let step = step.unwrap_or(1);
    let span = i128::from(end) - i128::from(start);
    let n = match step {
        0 => return Err(Error::new(ErrorKind::InvalidOperation, "range step is 0")),
        s if (s > 0) == (span > 0) => (span.abs() + i128::from(s).abs() - 1) / i128::from(s).abs(),
        _ => 0,
    };
    if n > MAX_RANGE as i128 {
        return Err(limit_error(format!(
            "range() of {n} items (at most {MAX_RANGE})"
        )));
    }
    let arg = |x: i64| {
        isize::try_from(x)
            .map_err(|_| Error::new(ErrorKind::InvalidOperation, "range() bound out of range"))
    };
    minijinja::functions::range(arg(start)?, Some(arg(end)?), Some(arg(step)?))
}

/// Wraps a builtin filter so that no integer argument (positional or keyword) exceeds
/// [`MAX_WIDTH`].
fn guard_filter<F, Rv, Args>(env: &mut minijinja::Environment<'static>, name: &'static str, f: F)
where
    F: minijinja::functions::Function<Rv, Args> + Send + Sync + 'static,
    Rv: minijinja::value::FunctionResult,
    Args: for<'a> minijinja::value::FunctionArgs<'a>,
{
    let inner = Value::from_function(f);
    env.add_filter(name, move |state: &State, args: Rest<Value>| {
        for arg in args.iter().skip(1) {
            check_width(name, arg)?;
            if arg.is_kwargs() {
                for key in arg.try_iter()? {
                    check_width(name, &arg.get_item(&key)?)?;
                }
            }
        }
        inner.call(state, &args)
    });
}

fn check_width(name: &str, arg: &Value) -> Result<(), Error> {
    if arg.kind() != ValueKind::Number {
        return Ok(()); // tojson's `indent=true`, indent's flags, strings
    }
    let wide = match arg.as_i64() {
        Some(w) => w.unsigned_abs() > MAX_WIDTH,
        None => f64::try_from(arg.clone()).map_or(true, |w| w.abs() > MAX_WIDTH as f64),
    };
    if wide {
        return Err(limit_error(format!(
            "{name} width {arg} (at most {MAX_WIDTH})"
        )));
    }
    Ok(())
}

/// Refuses a printf-style (`%10s`) or `str.format`-style (`{:>10}`) padding or precision
/// wider than [`MAX_WIDTH`]: both allocate it at once.
fn check_format(format: Option<&Value>) -> Result<(), Error> {
    let Some(text) = format.and_then(Value::as_str) else {
        return Ok(());
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &text[start..i];
        let wide = digits.len() > 3 || digits.parse::<u64>().is_ok_and(|w| w > MAX_WIDTH);
        if wide && in_format_spec(&bytes[..start]) {
            return Err(limit_error(format!(
                "format width {digits} (at most {MAX_WIDTH})"
            )));
        }
    }
    Ok(())
}

/// Whether digits preceded by `before` are a width or precision: a `%` or `:` among the last
/// four bytes (room for flag, alignment and fill characters).
fn in_format_spec(before: &[u8]) -> bool {
    before.iter().rev().take(4).any(|&b| b == b'%' || b == b':')
}
