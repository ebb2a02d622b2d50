//! Times as operators type and read them: durations (`90s`, `5m`, `1h30m`, `2d`), UTC wall
//! times (`2026-12-01 21:04:05`, `2026-12-01T21:04:05Z`, `21:04` for today), and the short
//! relative form status prints (`3m12s`). UTC throughout: the daemon and the reader may not
//! share a time zone, and no time-zone database is needed.

/// Milliseconds as a short duration: `850ms`, `12.4s`, `3m12s`, `2h05m`, `3d04h`.
pub fn duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    }
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD HH:MM:SSZ` for wall-clock milliseconds since the Unix epoch.
pub fn utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `HH:MM:SS.mmm` (UTC), for event lines of one day.
pub fn utc_time(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let rem = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        unix_ms % 1000
    )
}

/// A duration: numbers with units `ms`, `s`, `m`, `h`, `d` (`90s`, `1h30m`, `1.5h`); a
/// bare number is seconds.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(n) = s.parse::<f64>() {
        return secs_to_ms(n);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += n * unit;
    }
    secs_to_ms(total)
}

/// Seconds to milliseconds; `None` for negative or non-finite input.
fn secs_to_ms(secs: f64) -> Option<u64> {
    // `as` saturates at u64::MAX for huge values: a far past `--since` is simply "all".
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = (secs * 1000.0) as u64;
    (secs.is_finite() && secs >= 0.0).then_some(ms)
}

/// A UTC wall time: `YYYY-MM-DD`, `YYYY-MM-DD HH:MM[:SS]`, `YYYY-MM-DDTHH:MM[:SS][Z]`,
/// `HH:MM[:SS]` (today, or yesterday if that is still to come), or `@UNIX_SECONDS`.
pub fn parse_utc_ms(s: &str, now_unix_ms: u64) -> Option<u64> {
    let s = s.trim().trim_end_matches('Z');
    if let Some(secs) = s.strip_prefix('@') {
        return secs.parse::<u64>().ok().map(|v| v.saturating_mul(1000));
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (Some(d), Some(t)),
        None if s.contains('-') => (Some(s), None),
        None => (None, Some(s)),
    };
    let secs_of_day = match time {
        None => 0,
        Some(t) => {
            let parts: Vec<&str> = t.split(':').collect();
            if !(2..=3).contains(&parts.len()) {
                return None;
            }
            let h: u64 = parts[0].parse().ok().filter(|h| *h < 24)?;
            let m: u64 = parts[1].parse().ok().filter(|m| *m < 60)?;
            let sec: u64 = match parts.get(2) {
                Some(x) => x.parse().ok().filter(|s| *s < 61)?,
                None => 0,
            };
            h * 3600 + m * 60 + sec
        }
    };
    let day = match date {
        Some(d) => {
            let parts: Vec<&str> = d.split('-').collect();
            if parts.len() != 3 {
                return None;
            }
            let y: i64 = parts[0].parse().ok()?;
            let m: u32 = parts[1].parse().ok().filter(|m| (1..=12).contains(m))?;
            let dd: u32 = parts[2].parse().ok().filter(|d| (1..=31).contains(d))?;
            u64::try_from(days_from_civil(y, m, dd)).ok()?
        }
        None => {
            let today = now_unix_ms / 1000 / 86_400;
            if today * 86_400 + secs_of_day > now_unix_ms / 1000 {
                today.saturating_sub(1)
            } else {
                today
            }
        }
    };
    Some((day * 86_400 + secs_of_day) * 1000)
}

/// `--since`: a duration back from now, or a UTC wall time.
pub fn parse_since(s: &str, now_unix_ms: u64) -> Result<u64, String> {
    if let Some(d) = parse_duration_ms(s) {
        return Ok(now_unix_ms.saturating_sub(d));
    }
    parse_utc_ms(s, now_unix_ms).ok_or_else(|| {
        format!(
            "`{s}` is neither a duration (90s, 5m, 1h30m, 2d) nor a UTC time \
             (2026-12-01 21:04, 2026-12-01T21:04:05Z, 21:04, @UNIX_SECONDS)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-12-01 21:04:05 UTC.
    const T: u64 = 1_796_159_045_000;

    #[test]
    fn wall_times_round_trip() {
        assert_eq!(utc(T), "2026-12-01 21:04:05Z");
        assert_eq!(parse_utc_ms("2026-12-01 21:04:05", 0), Some(T));
        assert_eq!(parse_utc_ms("2026-12-01T21:04:05Z", 0), Some(T));
        assert_eq!(
            parse_utc_ms("2026-12-01", 0),
            Some(T - (21 * 3600 + 245) * 1000)
        );
        assert_eq!(parse_utc_ms("@1796159045", 0), Some(T));
        // A time of day that is still to come means yesterday.
        assert_eq!(parse_utc_ms("21:00", T), Some(T - 245_000));
        assert_eq!(parse_utc_ms("22:00", T), Some(T - 245_000 - 23 * 3_600_000));
        assert_eq!(parse_utc_ms("25:00", T), None);
        assert_eq!(parse_utc_ms("2026-13-01", T), None);
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration_ms("90s"), Some(90_000));
        assert_eq!(parse_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("1.5h"), Some(5_400_000));
        assert_eq!(parse_duration_ms("2d"), Some(172_800_000));
        assert_eq!(parse_duration_ms("10"), Some(10_000));
        assert_eq!(parse_duration_ms("5x"), None);
        assert_eq!(parse_duration_ms("-5"), None);
        assert_eq!(duration_ms(850), "850ms");
        assert_eq!(duration_ms(12_400), "12.4s");
        assert_eq!(duration_ms(192_000), "3m12s");
        assert_eq!(duration_ms(7_500_000), "2h05m");
        assert_eq!(parse_since("5m", T), Ok(T - 300_000));
        assert!(parse_since("soon", T).unwrap_err().contains("neither"));
    }
}
