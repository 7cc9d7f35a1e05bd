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

/// What kind of failure an [`Error`] is, without its message: for callers that handle bad
/// arguments, unsupported operations, allocation failures and I/O differently.
///
/// ```
/// use ggml::{Context, ErrorKind, Type};
/// let ctx = Context::init(1024, true).unwrap();
/// let e = ctx.new_tensor_1d(Type::Q4_0, 33).unwrap_err();
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// let e = (0..10).map(|_| ctx.new_tensor_1d(Type::F32, 4)).find_map(Result::err).unwrap();
/// assert_eq!(e.kind(), ErrorKind::AllocFailed);
/// assert_eq!(e.status(), ggml::Status::AllocFailed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`Error::InvalidArgument`]: the caller passed something unusable.
    InvalidArgument,
    /// [`Error::AllocFailed`]: memory (a context, a buffer) could not be had.
    AllocFailed,
    /// [`Error::Unsupported`]: no kernel, device or type for the request.
    Unsupported,
    /// [`Error::Freed`]: a handle was used after it was freed.
    Freed,
    /// [`Error::Compute`]: queued work failed.
    Compute,
    /// [`Error::Aborted`]: a computation was stopped on request.
    Aborted,
    /// [`Error::Io`]: reading or writing a file or stream failed.
    Io,
    /// [`Error::Format`]: a file's content is malformed.
    Format,
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::AllocFailed(_) => ErrorKind::AllocFailed,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Freed(_) => ErrorKind::Freed,
            Error::Compute(_) => ErrorKind::Compute,
            Error::Aborted(_) => ErrorKind::Aborted,
            Error::Io(_) => ErrorKind::Io,
            Error::Format(_) => ErrorKind::Format,
        }
    }

    /// The message, without the kind's prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::AllocFailed(m)
            | Error::Unsupported(m)
            | Error::Freed(m)
            | Error::Compute(m)
            | Error::Aborted(m)
            | Error::Io(m)
            | Error::Format(m) => m,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(msg: impl Into<String>) -> Error {
        Error::Unsupported(msg.into())
    }

    /// The GGML status this error corresponds to (`enum ggml_status` has only success, failure,
    /// allocation failure and abort: see [`Error::kind`] for the finer kinds).
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
