//! `strftime_now(format)`, which Hugging Face's renderer gives templates (gpt-oss writes the
//! current date into its system message): the wall clock is std's natively and the host's
//! where std has none (wasm32: [`set_wall_clock`]).

use std::sync::OnceLock;

static WALL_CLOCK: OnceLock<fn() -> i64> = OnceLock::new();

/// The wall clock (seconds since the Unix epoch) templates read, for hosts without std's (the
/// browser). The first call wins.
pub fn set_wall_clock(now: fn() -> i64) {
    let _ = WALL_CLOCK.set(now);
}

fn now_unix() -> i64 {
    if let Some(now) = WALL_CLOCK.get() {
        return now();
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::time::{SystemTime, UNIX_EPOCH};
        if let Ok(d) = SystemTime::now().duration_since(UNIX_EPOCH) {
            return d.as_secs() as i64;
        }
    }
    0
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

/// The civil date (UTC) of a day count since 1970-01-01.
fn civil(days: i64) -> (i64, usize, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as usize, day)
}

/// `format` with the current UTC time: `%Y %m %d %e %B %b %A %a %H %M %S %%`; other
/// directives are kept as written. The output is bounded by the format's length.
pub fn strftime_now(format: &str) -> String {
    strftime(now_unix(), format)
}

fn strftime(unix: i64, format: &str) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (year, month, day) = civil(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('B') => out.push_str(MONTHS[month - 1]),
            Some('b') => out.push_str(&MONTHS[month - 1][..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_strftime_writes_them() {
        // 2026-12-06 13:05:09 UTC, a Sunday.
        let t = 1_796_562_309;
        assert_eq!(strftime(t, "%Y-%m-%d %H:%M:%S"), "2026-12-06 13:05:09");
        assert_eq!(
            strftime(t, "%d %B %Y, %A (%b %a) %% %q"),
            "06 December 2026, Sunday (Dec Sun) % %q"
        );
        assert_eq!(strftime(0, "%Y-%m-%d %A"), "1970-01-01 Thursday");
        assert_eq!(strftime(951_782_400, "%Y-%m-%d"), "2000-02-29");
    }
}
