//! The examples' flag parsing: `-x N` pairs anywhere after the positional arguments.

/// The number after `flag` in `args`, or `default` when the flag is absent or not a number.
pub fn usize_flag(args: &[String], flag: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
