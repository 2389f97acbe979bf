//! HTTPS: the client reaches a loopback server whose certificate a test CA
//! signed once that CA is trusted (`TlsOptions::with_ca_file`), and refuses
//! it otherwise; a bad CA file is a clear error.

use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tern_client::tls::TlsOptions;
use tern_client::transport::http::HttpTransport;
use tern_client::{Client, ErrorKind};
use tern_server::transport::http::Http;

use tern_test_support::ports::Scratch;

use crate::harness::{bounded, scratch_file};
use crate::server;

/// A test CA (tern-test-support's) and a certificate for `localhost` /
/// 127.0.0.1 it signed.
pub struct TestCa {
    /// The CA certificate, PEM, written to a file.
    pub ca_file: PathBuf,
    /// The server's rustls config.
    pub server: Arc<rustls::ServerConfig>,
    _dir: Scratch,
}

impl TestCa {
    pub fn new() -> Self {
        Self::with_names(&[])
    }

    /// A CA whose server certificate also names `names`.
    pub fn with_names(names: &[&str]) -> Self {
        let dir = Scratch::new("client-ca");
        let ca = tern_test_support::ca::TestCa::new("tern test CA", &dir.0);
        let mut all = vec!["localhost", "127.0.0.1"];
        all.extend_from_slice(names);
        Self {
            ca_file: ca.file.clone(),
            server: ca.server_config(&all),
            _dir: dir,
        }
    }
}

/// Serves `app` over HTTPS on 127.0.0.1 for the rest of the test; the
/// base URL (`https://localhost:PORT`).
pub async fn serve_https(app: axum::Router, config: Arc<rustls::ServerConfig>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_https_on(listener, app, config)
}

/// [`serve_https`] on a listener already bound (so the URL is known before
/// the app is built).
pub fn serve_https_on(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    config: Arc<rustls::ServerConfig>,
) -> String {
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let app = app.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
            });
        }
    });
    format!("https://localhost:{port}")
}

async fn fixture(ca: &TestCa) -> String {
    let app = axum::Router::new().route_service("/mcp", Http::new(server::build()).into_service());
    format!("{}/mcp", serve_https(app, Arc::clone(&ca.server)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_test_ca_trusted() {
    let ca = TestCa::new();
    let url = fixture(&ca).await;
    let transport = HttpTransport::new(&url)
        .unwrap()
        .with_tls(&TlsOptions::new().with_ca_file(&ca.ca_file))
        .unwrap();
    let client = Client::builder().build(transport);
    let tools = bounded(client.list_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "greet"), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_refuses_a_certificate_no_trusted_root_signed() {
    let ca = TestCa::new();
    let url = fixture(&ca).await;
    // The built-in roots only: the test CA is unknown.
    let client = Client::builder().build(HttpTransport::new(&url).unwrap());
    let error = bounded(client.list_tools()).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    let chain = format!("{error:?}");
    assert!(
        chain.contains("UnknownIssuer") || chain.contains("certificate"),
        "{chain}"
    );
}

#[test]
fn a_ca_file_that_is_missing_or_not_pem_is_a_clear_error() {
    let missing = HttpTransport::new("https://localhost:1/mcp")
        .unwrap()
        .with_tls(&TlsOptions::new().with_ca_file("/nonexistent/tern-ca.pem"))
        .unwrap_err();
    assert!(
        missing.to_string().contains("cannot read the CA file"),
        "{missing}"
    );
    let garbage = scratch_file("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let empty = HttpTransport::new("https://localhost:1/mcp")
        .unwrap()
        .with_tls(&TlsOptions::new().with_ca_file(&garbage))
        .unwrap_err();
    std::fs::remove_file(&garbage).unwrap();
    assert!(
        empty.to_string().contains("holds no certificate"),
        "{empty}"
    );
}

#[test]
fn other_schemes_are_refused() {
    let error = HttpTransport::new("ftp://localhost/mcp").unwrap_err();
    assert!(
        error.to_string().contains("only http:// and https://"),
        "{error}"
    );
}
