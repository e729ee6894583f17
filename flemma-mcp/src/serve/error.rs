//! [`ServeError`]: what stops `flemma mcp serve` (a call's failure is an error result, not one
//! of these).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the server could not list its tools, run a call or keep serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The conversation file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The conversation's options do not evaluate, or a call could not be written, run or
    /// read back (the executor's error, with its causes).
    #[error(transparent)]
    Executor(#[from] flemma_runtime::ExecutorError),
    /// A call's cycle failed: its conversation, frontmatter or options, or the executor (the
    /// session's error, with its causes).
    #[error(transparent)]
    Session(#[from] flemma_runtime::SessionError),
    /// The conversation's options have errors (`PLACE: message`, one per line).
    #[error("the conversation's options have errors: {0}")]
    Options(String),
    /// The client named a tool the conversation does not offer.
    #[error("unknown tool `{0}`: the conversation does not offer it")]
    UnknownTool(String),
    /// The call's cycle ended without a result for it (a fault of the harness).
    #[error("the call `{0}` got no result")]
    NoResult(String),
    /// `--http` named an address that is not loopback, without the flag that allows it.
    #[error(
        "refusing to serve on {0}: not a loopback address (use 127.0.0.1 or ::1, or allow \
         other addresses explicitly)"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound or a connection could not be accepted.
    #[error("cannot serve on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The MCP session over stdio failed to start or ended abnormally.
    #[error("MCP transport: {0}")]
    Transport(String),
}
