//! The builtins that allocate in proportion to a number or to the product of their arguments'
//! sizes, replaced for each render with checked ones: the check runs before the allocation,
//! which the work budget ([`super::budget`]) only sees afterwards. Widths (`indent`,
//! `tojson(indent=..)`, format paddings) are refused above [`MAX_WIDTH`], `range()` above
//! [`MAX_RANGE`] items, and `join`, `replace` and `indent` (filters and Python methods) when
//! their result would exceed the render's value cap.
//!
//! `batch` and `slice` refuse counts above [`MAX_RANGE`] (they allocate the count at once), and
//! `str.count('')` is answered here: minijinja-contrib 2.24 loops forever on it.
//!
//! Slicing backwards (`[::-1]`) an empty value, or from before where the slice stops, panics
//! inside minijinja 2.24 (an index out of bounds, a subtraction below zero; found by fuzzing).
//! The instrumented template slices through [`SLICE`] instead, which makes such a slice (empty
//! in Python) as an empty forward slice and leaves every other slice to minijinja.

use std::sync::{Arc, OnceLock};

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

use super::budget::{weight, Budget, SLICE};
use super::limits::{limit_error, MAX_RANGE, MAX_WIDTH};

/// Registers the checked builtins and the Python-method callback on this render's `env`.
pub(super) fn install(env: &mut Environment<'static>, budget: &Arc<Budget>) {
    env.add_function("range", range);
    env.add_function(SLICE, slice);
    let cap = budget.value_cap();
    let indent = Value::from_function(minijinja::filters::indent);
    env.add_filter("indent", move |state: &State, args: Rest<Value>| {
        let width = check_widths("indent", &args)?;
        if let Some(text) = args.first().and_then(Value::as_str) {
            let lines = text.bytes().filter(|&b| b == b'\n').count() as u64 + 1;
            check_size(
                "indent",
                text.len() as u64 + lines * width.unwrap_or(4),
                cap,
            )?;
        }
        indent.call(state, &args)
    });
    let tojson = Value::from_function(minijinja::filters::tojson);
    env.add_filter("tojson", move |state: &State, args: Rest<Value>| {
        check_widths("tojson", &args)?;
        tojson.call(state, &args)
    });
    let format = Value::from_function(minijinja::filters::format);
    env.add_filter("format", move |state: &State, args: Rest<Value>| {
        check_format(args.first())?;
        format.call(state, &args)
    });
    // Both allocate their count at once (`Vec::with_capacity`; `slice` also loops over it).
    for (name, f) in [
        ("batch", Value::from_function(minijinja::filters::batch)),
        ("slice", Value::from_function(minijinja::filters::slice)),
    ] {
        env.add_filter(name, move |state: &State, args: Rest<Value>| {
            check_numbers(name, "count", MAX_RANGE as u64, &args)?;
            f.call(state, &args)
        });
    }
    let join = Value::from_function(minijinja::filters::join);
    env.add_filter("join", move |state: &State, args: Rest<Value>| {
        if let Some(items) = args.first() {
            let sep = args.get(1).and_then(Value::as_str).unwrap_or("");
            check_size("join", join_size(items, sep, cap), cap)?;
        }
        join.call(state, &args)
    });
    let replace = Value::from_function(minijinja::filters::replace);
    env.add_filter("replace", move |state: &State, args: Rest<Value>| {
        check_replace(&args, None, cap)?;
        replace.call(state, &args)
    });
    env.set_unknown_method_callback(move |state, value, method, args| {
        match (method, value.as_str()) {
            ("format", _) => check_format(Some(value))?,
            // minijinja-contrib 2.24 loops forever counting an empty string; Python counts the
            // places between characters.
            ("count", Some(s)) if args.first().and_then(Value::as_str) == Some("") => {
                return Ok(Value::from(s.chars().count() + 1));
            }
            ("join", Some(sep)) => {
                if let Some(items) = args.first() {
                    check_size("join", join_size(items, sep, cap), cap)?;
                }
            }
            ("replace", Some(_)) => {
                let all: Vec<Value> = std::iter::once(value.clone())
                    .chain(args.iter().cloned())
                    .collect();
                check_replace(&all, all.get(3).and_then(Value::as_i64), cap)?;
            }
            _ => {}
        }
        minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
    });
}

fn check_size(name: &str, size: u64, cap: u64) -> Result<(), Error> {
    if size > cap {
        return Err(limit_error(format!(
            "{name} would make more than {cap} bytes"
        )));
    }
    Ok(())
}

/// What joining `items` with `sep` writes, about (numbers count one byte), up to past `cap`.
fn join_size(items: &Value, sep: &str, cap: u64) -> u64 {
    let n = weight(items, false, cap + 1);
    weight(items, true, cap + 1).saturating_add(n.saturating_mul(sep.len() as u64))
}

/// Refuses `text.replace(old, new)` (the first three of `args`) when its result would pass
/// `cap`; `count` bounds the replacements like Python's third argument.
fn check_replace(args: &[Value], count: Option<i64>, cap: u64) -> Result<(), Error> {
    let (Some(text), Some(old), Some(new)) = (
        args.first().and_then(Value::as_str),
        args.get(1).and_then(Value::as_str),
        args.get(2).and_then(Value::as_str),
    ) else {
        return Ok(());
    };
    if new.len() <= old.len() {
        return Ok(());
    }
    let mut hits = if old.is_empty() {
        text.chars().count() as u64 + 1
    } else {
        text.matches(old).count() as u64
    };
    if let Some(count) = count.filter(|&c| c >= 0) {
        hits = hits.min(count as u64);
    }
    let grow = (new.len() - old.len()) as u64;
    check_size(
        "replace",
        (text.len() as u64).saturating_add(hits.saturating_mul(grow)),
        cap,
    )
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

/// Refuses an integer argument (positional or keyword) of a filter above [`MAX_WIDTH`]; gives
/// the first one (the width, for `indent`).
fn check_widths(name: &str, args: &[Value]) -> Result<Option<u64>, Error> {
    check_numbers(name, "width", MAX_WIDTH, args)
}

/// Refuses a number argument (positional or keyword) of a filter above `most`; gives the first.
fn check_numbers(name: &str, what: &str, most: u64, args: &[Value]) -> Result<Option<u64>, Error> {
    let mut first = None;
    for arg in args.iter().skip(1) {
        let mut values = vec![arg.clone()];
        if arg.is_kwargs() {
            for key in arg.try_iter()? {
                values.push(arg.get_item(&key)?);
            }
        }
        for v in values.iter().filter(|v| v.kind() == ValueKind::Number) {
            // tojson's `indent=true` and indent's flags are booleans, not numbers.
            let width = match v.as_i64() {
                Some(w) => w.unsigned_abs(),
                None => f64::try_from(v.clone()).map_or(u64::MAX, |w| w.abs() as u64),
            };
            if width > most {
                return Err(limit_error(format!("{name} {what} {v} (at most {most})")));
            }
            first.get_or_insert(width);
        }
    }
    Ok(first)
}

/// `value[start:stop:step]`, as minijinja slices, but for the backward slices it panics on.
fn slice(value: Value, start: Value, stop: Value, step: Value) -> Result<Value, Error> {
    if empty_backward(&value, &start, &stop, &step) {
        return minijinja_slice(value, 0.into(), 0.into(), 1.into());
    }
    minijinja_slice(value, start, stop, step)
}

/// minijinja's own slicing, through an expression compiled once.
fn minijinja_slice(v: Value, a: Value, b: Value, c: Value) -> Result<Value, Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static EXPR: OnceLock<minijinja::Expression<'static, 'static>> = OnceLock::new();
    let expr = EXPR.get_or_init(|| {
        let env = ENV.get_or_init(Environment::new);
        env.compile_expression("v[a:b:c]")
            .expect("a slice expression compiles")
    });
    expr.eval(minijinja::context! { v, a, b, c })
}

/// Whether this is a backward slice whose result is empty in a way minijinja 2.24 mishandles:
/// of an empty value, or starting before where it stops (its `range_step_backwards`
/// normalises the bounds, then indexes an empty vector or subtracts below zero).
fn empty_backward(value: &Value, start: &Value, stop: &Value, step: &Value) -> bool {
    let int = |v: &Value| i64::try_from(v.clone()).ok();
    match int(step) {
        Some(s) if s < 0 && !step.is_none() => {}
        _ => return false,
    }
    let end = match value.kind() {
        ValueKind::String => value.as_str().map_or(0, |s| s.chars().count()),
        ValueKind::Bytes => value.as_bytes().map_or(0, <[u8]>::len),
        ValueKind::Seq | ValueKind::Iterable => match value.len() {
            Some(n) => n,
            None => value.try_iter().map_or(0, Iterator::count),
        },
        _ => return false,
    } as i64;
    let bound = |v: &Value| {
        if v.is_none() {
            Some(None)
        } else {
            int(v).map(Some)
        }
    };
    let (Some(start), Some(stop)) = (bound(start), bound(stop)) else {
        return false; // not integers: minijinja reports the error
    };
    let first = match start {
        None => (end - 1).max(0),
        Some(s) if s >= end => (end - 1).max(0),
        Some(s) if s >= 0 => s,
        Some(s) => (end + s).max(0),
    };
    let last = match stop {
        None => 0,
        Some(s) if s < 0 => (end + s).max(0),
        Some(s) => s,
    };
    end == 0 || (last != 0 && first < last)
}

/// Refuses a printf-style (`%10s`) or `str.format`-style (`{:>10}`) padding or precision
/// wider than [`MAX_WIDTH`]: both allocate it at once.
fn check_format(format: Option<&Value>) -> Result<(), Error> {
    let Some(text) = format.and_then(Value::as_str) else {
        return Ok(());
    };
    check_format_keys(text)?;
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

/// Refuses a format key (`'{0[k]}'.format(..)`, `'%(k)s' | format(..)`) holding a character
/// outside ASCII: minijinja 2.24 walks keys byte by byte and panics when it slices inside a
/// character (found by fuzzing).
fn check_format_keys(text: &str) -> Result<(), Error> {
    let mut in_field = false;
    let mut close = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (close, c) {
            (Some(end), c) if c == end => close = None,
            (Some(_), c) if !c.is_ascii() => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "a format key outside ASCII is not supported",
                ))
            }
            (Some(_), _) => {}
            (None, '{') if chars.peek() == Some(&'{') => {
                chars.next();
            }
            (None, '{') => in_field = true,
            (None, '}') => in_field = false,
            (None, '[') if in_field => close = Some(']'),
            (None, '%') if chars.peek() == Some(&'(') => {
                chars.next();
                close = Some(')');
            }
            (None, _) => {}
        }
    }
    Ok(())
}
