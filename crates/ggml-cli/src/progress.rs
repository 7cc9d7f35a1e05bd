//! A one-line progress report on stderr with an estimate of the time left, for commands that
//! run for more than a moment (`bench`, `gguf quantize`, loading a model and processing its
//! prompt). It is drawn only when stderr is a
//! terminal, once the work has run for a second, and at most ten times a second; other stderr
//! lines are printed through [`Progress::println`], which keeps the report below them.

use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

/// How long work runs before the report appears.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// The least time between two redraws.
const REDRAW_EVERY: Duration = Duration::from_millis(100);
/// Width of the bar, in characters.
const BAR: usize = 24;

/// The progress of one piece of work measured in units of `total` (bytes, cases).
pub struct Progress {
    total: f64,
    done: f64,
    start: Instant,
    last_draw: Option<Instant>,
    tty: bool,
    shown: bool,
}

impl Progress {
    /// Work of `total` units, starting now.
    pub fn new(total: f64) -> Progress {
        Progress {
            total,
            done: 0.0,
            start: Instant::now(),
            last_draw: None,
            tty: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Marks `amount` more units done; `now` names what runs next.
    pub fn advance(&mut self, amount: f64, now: &str) {
        self.set(self.done + amount, self.total, now);
    }

    /// Marks `done` units of `total` done (for work whose size is learnt as it runs); `now`
    /// names what runs next.
    pub fn set(&mut self, done: f64, total: f64, now: &str) {
        self.done = done;
        self.total = total;
        if !self.tty || self.start.elapsed() < QUIET_FOR {
            return;
        }
        if self.last_draw.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let line = render(self.done, self.total, self.start.elapsed(), now);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.shown = true;
    }

    /// Prints `line` on stderr above the report.
    pub fn println(&mut self, line: &str) {
        self.clear();
        eprintln!("{line}");
    }

    /// Erases the report (the next [`Progress::advance`] draws it again); call before
    /// printing to a stdout that may share the terminal, and before the command's last output.
    pub fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            self.shown = false;
        }
        self.last_draw = None;
    }

    /// Whether the report is drawn at all (stderr is a terminal).
    pub fn is_live(&self) -> bool {
        self.tty
    }
}

/// The report: a bar, the share done, and the time left estimated from the rate so far.
fn render(done: f64, total: f64, elapsed: Duration, now: &str) -> String {
    let share = if total > 0.0 {
        (done / total).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let filled = (share * BAR as f64).round() as usize;
    let left = match estimate_left(done, total, elapsed) {
        Some(d) => format!("about {} left", human_duration(d)),
        None => "estimating".to_string(),
    };
    format!(
        "[{}{}] {:3.0}% {left}  {:.40}",
        "#".repeat(filled),
        " ".repeat(BAR - filled),
        share * 100.0,
        now
    )
}

/// The time left if the rest goes at the rate so far; `None` before anything is done.
fn estimate_left(done: f64, total: f64, elapsed: Duration) -> Option<Duration> {
    (done > 0.0).then(|| elapsed.mul_f64(((total - done) / done).max(0.0)))
}

/// `d` as `1h02m`, `3m05s` or `12s`.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_scale_the_elapsed_time_by_the_work_left() {
        let ten = Duration::from_secs(10);
        assert_eq!(estimate_left(0.0, 4.0, ten), None);
        assert_eq!(estimate_left(1.0, 4.0, ten), Some(Duration::from_secs(30)));
        assert_eq!(estimate_left(4.0, 4.0, ten), Some(Duration::ZERO));
        assert_eq!(estimate_left(5.0, 4.0, ten), Some(Duration::ZERO));
    }

    #[test]
    fn durations_and_lines_read_well() {
        assert_eq!(human_duration(Duration::from_secs(12)), "12s");
        assert_eq!(human_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(human_duration(Duration::from_secs(3720)), "1h02m");
        let line = render(1.0, 4.0, Duration::from_secs(10), "blk.0.attn_q.weight");
        assert_eq!(
            line,
            "[######                  ]  25% about 30s left  blk.0.attn_q.weight"
        );
        assert!(render(0.0, 4.0, Duration::from_secs(1), "x").contains("estimating"));
        assert!(render(0.0, 0.0, Duration::ZERO, "x").contains("100%"));
    }
}
