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

use super::error::ServeError;
use super::server::ToolServer;

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
/// session per client (`Mcp-Session-Id`), each with a clone of the server.
///
/// Against DNS rebinding (a web page whose name is made to point at 127.0.0.1), requests
/// must name a loopback host (`Host: 127.0.0.1:PORT`, `localhost`), unless the listener is
/// bound elsewhere (then its address is allowed too); and a request that carries an `Origin`
/// is refused with `403 Forbidden`, before it reaches the server, unless that origin is the
/// server's own: `http://127.0.0.1:PORT`, `http://localhost:PORT` or `http://[::1]:PORT` at
/// the listener's port, or `http://ADDR:PORT` of the listener's address (the streamable HTTP
/// transport's security warning: servers must validate `Origin`). A request without `Origin`
/// is served: non-browser clients send none, and a browser always sends one with a
/// cross-origin request.
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
    // A non-empty list turns rmcp's check of `Origin` on (an empty one turns it off).
    config.allowed_origins = own_origins(addr);
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

/// The origins of a server listening on `addr`: the loopback names at its port, and its own
/// address (`[…]` around an IPv6 address).
fn own_origins(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut origins: Vec<String> = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect();
    let own = format!("http://{addr}");
    if !origins.contains(&own) {
        origins.push(own);
    }
    origins
}

/// `404 Not Found` for a path other than [`ENDPOINT`].
fn not_found() -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"Not Found")).boxed());
    *response.status_mut() = hyper::StatusCode::NOT_FOUND;
    response
}

#[cfg(test)]
mod tests {
    use super::own_origins;

    #[test]
    fn the_origins_are_the_loopback_names_and_the_address_at_the_port() {
        assert_eq!(
            own_origins("127.0.0.1:8080".parse().unwrap()),
            [
                "http://127.0.0.1:8080",
                "http://localhost:8080",
                "http://[::1]:8080"
            ]
        );
        assert_eq!(
            own_origins("[::1]:9".parse().unwrap()),
            ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9"]
        );
        assert_eq!(
            own_origins("192.0.2.7:80".parse().unwrap()),
            [
                "http://127.0.0.1:80",
                "http://localhost:80",
                "http://[::1]:80",
                "http://192.0.2.7:80"
            ]
        );
    }
}
