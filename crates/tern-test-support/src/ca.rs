//! A test certificate authority (rcgen, ring keys): its certificate as a PEM
//! file a client can be told to trust, and server certificates it signs,
//! as PEM files (for a redis-server) or as a rustls server config (for an
//! HTTPS server in the test).

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate the CA signed, and its private key.
pub struct Leaf {
    /// The certificate, DER.
    pub cert_der: rustls::pki_types::CertificateDer<'static>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 DER.
    pub key_der: Vec<u8>,
    /// The private key, PEM.
    pub key_pem: String,
}

/// A test CA.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    cert: rcgen::Certificate,
    /// The CA certificate, PEM, in the folder it was given.
    pub file: PathBuf,
}

impl std::fmt::Debug for Leaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leaf").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TestCa {
    /// A CA named `name`, its certificate written to `dir/ca.pem`.
    ///
    /// # Panics
    /// When a key cannot be generated or the file written.
    pub fn new(name: &str, dir: &Path) -> Self {
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("the CA certificate");
        let file = dir.join("ca.pem");
        std::fs::write(&file, cert.pem()).expect("ca.pem");
        Self {
            issuer: rcgen::Issuer::new(params, key),
            cert,
            file,
        }
    }

    /// A certificate for `names` (DNS names or IP addresses) this CA signed.
    ///
    /// # Panics
    /// When the names are not valid subject alternative names.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let key = rcgen::KeyPair::generate().expect("a leaf key");
        let cert = rcgen::CertificateParams::new(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .expect("leaf params")
        .signed_by(&key, &self.issuer)
        .expect("the leaf certificate");
        Leaf {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A rustls server config presenting a certificate for `names`.
    ///
    /// # Panics
    /// As [`TestCa::leaf`].
    pub fn server_config(&self, names: &[&str]) -> Arc<rustls::ServerConfig> {
        let leaf = self.leaf(names);
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf.key_der.into());
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![leaf.cert_der], key)
            .expect("the server certificate");
        Arc::new(config)
    }

    /// A rustls client config trusting this CA only.
    ///
    /// # Panics
    /// Never for a CA this module made.
    pub fn client_config(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.cert.der().clone())
            .expect("the CA as a root");
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    }
}
