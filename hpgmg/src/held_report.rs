//! The report held in memory until the run's end, for a run over spare processes
//! (`--spares`, `cd-runtime/src/REAL_LOSS.md`).
//!
//! A rank's body that a lost process interrupts runs again from its start, and a spare that
//! took rank 0's place cannot know which lines the killed process got out: a report streamed
//! as it is written would come out with lines repeated or missing. Held, the report of the
//! attempt that finishes is the whole one: each solve keeps the text written before it in the
//! state its strict CD preserves ([`crate::progress::Progress::printed`]), and a rerun resuming
//! at that solve starts its report from that text, so the rest it writes follows exactly what
//! the uninterrupted run wrote. The driver prints the text once the job has ended.

use std::io::Write;

/// Where the benchmark's report goes: straight to the caller's writer, or held in memory and
/// written to it in one piece by [`ReportOut::finish`].
pub struct ReportOut<'a, W: Write> {
    out: &'a mut W,
    held: Option<Vec<u8>>,
}

impl<'a, W: Write> ReportOut<'a, W> {
    /// A report to `out`, held until [`ReportOut::finish`] when `hold`.
    pub fn new(out: &'a mut W, hold: bool) -> Self {
        ReportOut {
            out,
            held: hold.then(Vec::new),
        }
    }

    /// The text held so far (`None` when the report is not held).
    pub fn held(&self) -> Option<String> {
        // Everything written is formatted text, so the bytes are UTF-8.
        self.held
            .as_ref()
            .map(|h| String::from_utf8_lossy(h).into_owned())
    }

    /// Replaces the text held so far by `text` (a rerun taking up the report where the solve
    /// it resumes at found it); nothing when the report is not held.
    pub fn resume_from(&mut self, text: &str) {
        if let Some(h) = &mut self.held {
            h.clear();
            h.extend_from_slice(text.as_bytes());
        }
    }

    /// Writes the held text to the caller's writer and flushes it.
    pub fn finish(self) -> std::io::Result<()> {
        if let Some(h) = &self.held {
            self.out.write_all(h)?;
        }
        self.out.flush()
    }
}

impl<W: Write> Write for ReportOut<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.held {
            Some(h) => {
                h.extend_from_slice(buf);
                Ok(buf.len())
            }
            None => self.out.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.held {
            Some(_) => Ok(()),
            None => self.out.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_report_reaches_the_writer_only_at_its_end_and_resumes_from_a_kept_text() {
        let mut sink = Vec::new();
        let mut out = ReportOut::new(&mut sink, true);
        write!(out, "header\nsolve 0\n").unwrap();
        let before_solve_1 = out.held().unwrap();
        writeln!(out, "solve 1").unwrap();
        // A rerun writes its header again, then takes up the text kept with solve 1.
        out.resume_from("");
        writeln!(out, "header").unwrap();
        out.resume_from(&before_solve_1);
        write!(out, "solve 1\nend\n").unwrap();
        out.flush().unwrap();
        out.finish().unwrap();
        assert_eq!(sink, b"header\nsolve 0\nsolve 1\nend\n");
    }

    #[test]
    fn a_streamed_report_goes_straight_through() {
        let mut sink = Vec::new();
        let mut out = ReportOut::new(&mut sink, false);
        writeln!(out, "a").unwrap();
        assert_eq!(out.held(), None);
        out.resume_from("ignored");
        writeln!(out, "b").unwrap();
        out.finish().unwrap();
        assert_eq!(sink, b"a\nb\n");
    }
}
