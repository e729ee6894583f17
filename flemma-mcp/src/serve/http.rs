//! Streamable HTTP: rmcp's service at [`ENDPOINT`], on hyper's HTTP/1 server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::service::Service as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{ServeError, ToolServer};

/// The path the MCP endpoint answers at (`http://127.0.0.1:PORT/mcp`); every other path is
/// `404 Not Found`.
pub const ENDPOINT: &str = "/mcp";

/// Binds `addr` for [`serve_http`]: a loopback address (`127.0.0.1`, `::1`) unless
/// `allow_remote`, since the tools run as this user, with no authentication of the client.
///
/// ```
/// # async fn run() -> Result<(), flemma_mcp::serve::ServeError> {
/// let remote = "0.0.0.0:8080".parse().unwrap();
/// assert!(matches!(
///     flemma_mcp::serve::bind(remote, false).await,
///     Err(flemma_mcp::serve::ServeError::NotLoopback(_))
/// ));
/// let local = flemma_mcp::serve::bind("127.0.0.1:0".parse().unwrap(), false).await?;
/// assert!(local.local_addr().unwrap().ip().is_loopback());
/// # Ok(())
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
/// ```
///
/// # Errors
///
/// [`ServeError::NotLoopback`], and [`ServeError::Bind`] when the address cannot be bound.
pub async fn bind(addr: SocketAddr, allow_remote: bool) -> Result<TcpListener, ServeError> {
    if !allow_remote && !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback(addr));
    }
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Serves `server` over streamable HTTP on `listener` until `shutdown` completes: one MCP
/// session per client (`Mcp-Session-Id`), each with a clone of the server. Requests must name
/// a loopback host (`Host: 127.0.0.1:PORT`, `localhost`), as rmcp checks against DNS
/// rebinding, unless the listener is bound elsewhere (then its address is allowed too).
///
/// # Errors
///
/// [`ServeError::Bind`] when the listener's address cannot be read or a connection cannot
/// be accepted.
pub async fn serve_http(
    server: ToolServer,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    tokio::pin!(shutdown);
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = stop.child_token();
    if !addr.ip().is_loopback() {
        config.allowed_hosts.push(addr.ip().to_string());
        config.allowed_hosts.push(addr.to_string());
    }
    let service = TowerToHyperService::new(StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    ));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return Ok(()),
        };
        let (stream, _) = accepted.map_err(|source| ServeError::Bind { addr, source })?;
        let service = service.clone();
        let routed = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let service = service.clone();
            async move {
                if request.uri().path() == ENDPOINT {
                    service.call(request).await
                } else {
                    Ok(not_found())
                }
            }
        });
        let stopped = stop.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), routed);
            // On shutdown the connection is dropped (its sessions are cancelled already).
            tokio::select! {
                done = connection => {
                    if let Err(error) = done {
                        tracing::debug!(target: "flemma_mcp::serve", "HTTP connection: {error}");
                    }
                }
                () = stopped.cancelled() => {}
            }
        });
    }
}

/// `404 Not Found` for a path other than [`ENDPOINT`].
fn not_found() -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"Not Found")).boxed());
    *response.status_mut() = hyper::StatusCode::NOT_FOUND;
    response
}
