//! The CPU time of this process, which other load on a shared machine disturbs less than
//! wall time: a second measure of the overhead lines.

/// CPU seconds (user + sys) this process has used, all threads included.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 (1-based), 12 and 13 after the command.
    match (ticks(11), ticks(12)) {
        // The kernel reports clock ticks; USER_HZ is 100 on Linux.
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}
