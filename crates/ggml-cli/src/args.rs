//! Command-line pieces the commands share, so that an option is spelled the same everywhere
//! (`-t/--threads N` for every command that computes).

use std::ffi::OsString;

/// A cursor over a command's arguments.
pub struct Args<'a> {
    args: &'a [OsString],
    next: usize,
}

impl<'a> Args<'a> {
    /// The arguments after the command's name.
    pub fn new(args: &'a [OsString]) -> Args<'a> {
        Args { args, next: 0 }
    }

    /// The next argument (lossily as UTF-8; see [`Args::current_os`] for the exact one).
    pub fn next(&mut self) -> Option<String> {
        let a = self.args.get(self.next)?;
        self.next += 1;
        Some(a.to_string_lossy().into_owned())
    }

    /// The argument [`Args::next`] returned last, as given (paths need not be UTF-8).
    pub fn current_os(&self) -> &'a OsString {
        &self.args[self.next.saturating_sub(1)]
    }

    /// The value after the option `flag`; `Err` names the option when there is none.
    pub fn value(&mut self, flag: &str) -> Result<String, String> {
        self.next().ok_or_else(|| format!("{flag} needs a value"))
    }
}

/// Parses the value of `-t/--threads`: a positive number.
pub fn threads(flag: &str, value: &str) -> Result<usize, String> {
    value
        .parse()
        .ok()
        .filter(|&n: &usize| n > 0)
        .ok_or_else(|| format!("{flag} needs a positive number of threads, got {value:?}"))
}

/// The default thread count: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_their_flags() {
        let v: Vec<OsString> = ["-t", "3", "x", "--imatrix"].map(OsString::from).to_vec();
        let mut a = Args::new(&v);
        assert_eq!(a.next().as_deref(), Some("-t"));
        assert_eq!(a.value("-t").as_deref(), Ok("3"));
        assert_eq!(a.next().as_deref(), Some("x"));
        assert_eq!(a.current_os(), "x");
        assert_eq!(a.next().as_deref(), Some("--imatrix"));
        assert_eq!(
            a.value("--imatrix"),
            Err("--imatrix needs a value".to_string())
        );
        assert_eq!(a.next(), None);
    }

    #[test]
    fn threads_must_be_positive() {
        assert_eq!(threads("-t", "4"), Ok(4));
        for bad in ["0", "-1", "many", ""] {
            let e = threads("--threads", bad).unwrap_err();
            assert!(
                e.contains("--threads") && e.contains(&format!("{bad:?}")),
                "{e}"
            );
        }
    }
}
