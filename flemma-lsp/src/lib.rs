//! A language server for flemma's `.chat` transcripts (`flemma lsp`).
//!
//! Built on [`lsp_server`] (rust-analyzer's scaffold): the server drives its own synchronous
//! message loop, so document notifications are handled one after another in the order the
//! client sent them, and every edit reaches the [`IncrementalParser`](flemma_ast::IncrementalParser)
//! before the next request reads the document. (`tower-lsp` runs notification handlers
//! concurrently and has had no release since 2023.)
//!
//! What it does today:
//!
//! - text sync: incremental; each change is a byte-exact splice of the parser's text
//!   ([`IncrementalParser::replace_range`](flemma_ast::IncrementalParser::replace_range)),
//!   with positions converted between the protocol's UTF-16 characters (lines broken at `\n`,
//!   `\r\n` and a lone `\r`) and the parser's bytes ([`LineIndex`]);
//! - diagnostics: the parser's, published when a document opens and, debounced, after it
//!   changes ([`ServerOptions::debounce`]);
//! - document symbols (messages, with their tool uses, results, job results and thinking
//!   blocks) and folding ranges.
//!
//! ```
//! use flemma_lsp::{Server, ServerOptions};
//! use lsp_server::Connection;
//!
//! // A client and the server on an in-memory connection (a test's; `serve_stdio` is the
//! // editor's).
//! let (server, client) = Connection::memory();
//! let thread = std::thread::spawn(move || Server::new(ServerOptions::default()).run(&server));
//! # drop(client);
//! # let _ = thread.join();
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod actions;
mod checks;
mod complete;
mod cycle;
mod document;
mod error;
mod explain;
mod frame;
mod hover;
mod input;
mod jobs;
mod link;
mod navigation;
mod outline;
mod position;
mod server;

pub use actions::{
    APPROVE, APPROVE_ALL, Action, COMMANDS, CYCLE, REJECT, action_edit, code_actions, code_lenses,
    workspace_edit,
};
pub use complete::completions;
pub use document::OpenDocument;
pub use error::LspError;
pub use frame::MAX_FRAME;
pub use hover::{Host, JobStatus, hover};
pub use navigation::{definition, path_uri, references, uri_path};
pub use outline::{SOURCE, diagnostics, document_symbols, folding_ranges};
pub use position::LineIndex;
pub use server::{Server, ServerOptions, capabilities};

/// Serves on standard input and output until the client says `shutdown` and `exit`.
///
/// # Errors
///
/// As [`Server::run`], and [`LspError::Io`] when standard input or output fails.
pub fn serve_stdio(options: ServerOptions) -> Result<(), LspError> {
    serve_io(options, std::io::stdin(), std::io::stdout())
}

/// Serves on a byte stream in the protocol's framing (a socket, a pipe): messages read from
/// `input` and written to `output` until the client says `shutdown` and `exit`.
///
/// A frame that is not a message is refused and the server goes on: a header without a
/// `Content-Length` that is a number of at most [`MAX_FRAME`] bytes (the body that follows
/// is then taken to be the JSON value written next), a body that is not a JSON-RPC message.
/// The refusal answers the frame's request (`InvalidRequest`) when it has an id, and is a
/// `window/logMessage` warning otherwise. No more is allocated than was read.
///
/// ```no_run
/// use std::os::unix::net::UnixListener;
///
/// let listener = UnixListener::bind("/tmp/flemma-lsp.sock")?;
/// let (stream, _) = listener.accept()?;
/// flemma_lsp::serve_io(flemma_lsp::ServerOptions::default(), stream.try_clone()?, stream)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`Server::run`], and [`LspError::Io`] when reading or writing fails.
pub fn serve_io<R, W>(options: ServerOptions, input: R, output: W) -> Result<(), LspError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    link::over_io(input, output, |link| Server::new(options).serve(&link))
}
