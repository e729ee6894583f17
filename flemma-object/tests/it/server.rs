//! moto's S3 server on 127.0.0.1, started once per test binary (`tests/object/s3_server.py`);
//! it stops when this process ends (its standard input closes).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};

use flemma_object::Bucket;
use object_store::aws::AmazonS3Builder;

pub(crate) struct Server {
    _child: Child,
    pub(crate) endpoint: String,
}

fn start() -> Server {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("tests/object/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test installs moto's server (tests/object/requirements.txt)",
        python.display()
    );
    let mut child = Command::new(python)
        .arg(root.join("tests/object/s3_server.py"))
        .args(
            std::env::var_os("FLEMMA_TEST_MOTO_THREADED")
                .is_none()
                .then_some("--serialized"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start moto's server: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("stdout"));
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("moto's server did not say its port: {e}"));
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("moto's server said {line:?}, not a port"));
    Server {
        _child: child,
        endpoint: format!("http://127.0.0.1:{port}"),
    }
}

pub(crate) fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(start)
}

/// A server of its own, for a test whose load would slow the others' requests (the server
/// answers one request at a time); it stops when dropped (its standard input closes).
#[allow(dead_code, reason = "only the fleet test starts a server of its own")]
pub(crate) fn start_own() -> Server {
    start()
}

/// A new bucket on the shared server (its name unique in this process), and its client.
pub(crate) async fn bucket() -> Bucket {
    bucket_on(server()).await
}

/// A new bucket on `server` (its name unique in this process), and its client.
pub(crate) async fn bucket_on(server: &Server) -> Bucket {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("flemma-it-{}-{n}", std::process::id());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let created = reqwest::Client::new()
        .put(format!("{}/{name}", server.endpoint))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create bucket: {e}"));
    assert!(
        created.status().is_success(),
        "create bucket: {}",
        created.status()
    );
    let store = AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_allow_http(true)
        .with_bucket_name(&name)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"));
    Bucket::with_paginated_store(&name, Arc::new(store))
}
