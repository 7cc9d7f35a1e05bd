//! The library's error type. Every fallible public function returns [`Result`].

/// GGML's status codes (`enum ggml_status`), for callers that need the C-level classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// `GGML_STATUS_ALLOC_FAILED` (-2): memory could not be had.
    AllocFailed = -2,
    /// `GGML_STATUS_FAILED` (-1): any other failure.
    Failed = -1,
    /// `GGML_STATUS_SUCCESS` (0).
    Success = 0,
    /// `GGML_STATUS_ABORTED` (1): the computation was stopped on request.
    Aborted = 1,
}

/// An error, with a message that names the argument and value that were wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An argument was out of range, of the wrong shape or type, or otherwise unusable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Memory (a context's arena, a buffer) could not be allocated.
    #[error("allocation failed: {0}")]
    AllocFailed(String),
    /// The operation is not supported by this backend, device or type.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A handle was used after it was freed.
    #[error("use after free: {0}")]
    Freed(String),
    /// Queued work failed; reported by `synchronize`.
    #[error("computation failed: {0}")]
    Compute(String),
    /// The computation was aborted.
    #[error("aborted: {0}")]
    Aborted(String),
    /// A file or byte stream could not be read or written.
    #[error("i/o: {0}")]
    Io(String),
    /// A file's content is malformed (offset and field in the message).
    #[error("format: {0}")]
    Format(String),
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(msg: impl Into<String>) -> Error {
        Error::Unsupported(msg.into())
    }

    /// The GGML status this error corresponds to.
    pub fn status(&self) -> Status {
        match self {
            Error::AllocFailed(_) => Status::AllocFailed,
            Error::Aborted(_) => Status::Aborted,
            _ => Status::Failed,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e.to_string())
    }
}

/// `Result<T, ggml::Error>`.
pub type Result<T> = std::result::Result<T, Error>;
