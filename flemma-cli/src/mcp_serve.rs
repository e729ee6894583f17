//! `flemma mcp serve [FILE] [--http ADDR] [--approve MODE]`: the conversation's tools served
//! to another MCP client (an editor, an agent) over stdio or streamable HTTP
//! ([`flemma::mcp::serve`]).
//!
//! The tool set, the approval chain and the sandbox are FILE's as `flemma cycle` applies them
//! (`flemma.toml`, `--set`, the frontmatter, read again for every request). Over stdio the
//! protocol owns standard output; diagnostics go to stderr. With `--http` the command prints
//! `flemma: serving MCP on http://ADDR/mcp` on stderr and serves until Ctrl-C or SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use flemma::mcp::serve::{ServeApproval, ToolServer};

use crate::failure::{Failure, failed};
use crate::options::Settings;

/// The arguments of `flemma mcp serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The `.chat` file whose options (frontmatter) and directory the tools use (default: no
    /// frontmatter, the working directory).
    file: Option<PathBuf>,
    /// Serve streamable HTTP on ADDR (`127.0.0.1:PORT`; port 0 picks one) at `/mcp` instead
    /// of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Let `--http` bind an address that is not loopback. There is no authentication: whoever
    /// reaches the address runs the tools as you.
    #[arg(long, requires = "http")]
    allow_remote: bool,
    /// What happens to calls the approval chain leaves pending (a human would decide them).
    #[arg(long, value_enum, default_value = "none")]
    approve: ServeApprove,
}

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ServeApprove {
    /// Refuse them with an error result.
    None,
    /// Approve and run them: the client's user is the one who decides.
    All,
}

/// `flemma mcp serve`.
pub(crate) fn serve(args: &ServeArgs, settings: &Settings) -> Result<u8, Failure> {
    if let Some(file) = &args.file {
        // A regular file of UTF-8 text, as every command reads FILE (exit 2 otherwise).
        crate::input::Input::check(file)?;
    }
    let config = settings.load()?;
    let mut builder = ToolServer::builder(crate::setup::registry(&config)?)
        .config(config)
        // As `flemma cycle`: sandboxed when `sandbox.enabled` is on and bubblewrap can run.
        .sandbox_backends(flemma::builtins::sandbox_backends())
        .approval(match args.approve {
            ServeApprove::None => ServeApproval::Refuse,
            ServeApprove::All => ServeApproval::All,
        });
    if let Some(file) = &args.file {
        builder = builder.file(file);
    }
    let server = builder.build();
    let runtime = crate::runtime::runtime()?;
    let outcome = runtime.block_on(async {
        let Some(addr) = args.http else {
            return server.serve_stdio().await;
        };
        let listener = flemma::mcp::serve::bind(addr, args.allow_remote).await?;
        let bound = listener.local_addr().unwrap_or(addr);
        let _ = writeln!(
            std::io::stderr(),
            "flemma: serving MCP on http://{bound}{}",
            flemma::mcp::serve::ENDPOINT
        );
        flemma::mcp::serve::serve_http(server, listener, stopped()).await
    });
    // A tool stuck in a blocking call must not keep the command alive (`runtime::finish`).
    drop(runtime);
    outcome.map_err(|e| failed(anyhow::Error::new(e)))?;
    Ok(0)
}

/// Ctrl-C, or SIGTERM / SIGHUP on Unix.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
