//! TLS for tests: a certificate authority made on the spot (rcgen), a server certificate for
//! `localhost` / `127.0.0.1` and a client certificate it signed, and a `redis-server` that speaks
//! TLS with them.
//!
//! [`TlsRedis::start`] listens with TLS on [`TlsRedis::tls_port`] and, for the harness only, in
//! plain text on [`TlsRedis::plain_port`] (readiness probes and `redis-cli`). With
//! `require_client_cert` the server refuses clients without a certificate signed by the CA.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

use crate::free_port;
use crate::member::{Member, cli, fresh_dir, server_args, which};

/// PEM files written by [`TlsFiles::generate`].
#[derive(Debug)]
pub struct TlsFiles {
    dir: PathBuf,
    /// The CA certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate (SANs `localhost` and `127.0.0.1`).
    pub server_cert: PathBuf,
    /// The server's private key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// The client's private key.
    pub client_key: PathBuf,
    /// A second CA that signed nothing here (a client trusting only it must refuse the server).
    pub other_ca: PathBuf,
}

impl TlsFiles {
    /// Makes a CA, a server and a client certificate, and writes them into a fresh directory.
    ///
    /// # Panics
    /// If key generation or writing fails.
    pub fn generate() -> TlsFiles {
        let dir = fresh_dir("tls");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("the temp dir is writable");
            path
        };
        let (ca_pem, ca) = authority("Sluice test CA");
        let (other_pem, _) = authority("Unrelated CA");
        let leaf = |names: Vec<String>, purpose| {
            let key = KeyPair::generate().expect("key generation");
            let mut params = CertificateParams::new(names).expect("valid names");
            params.extended_key_usages = vec![purpose];
            let cert = params.signed_by(&key, &ca).expect("signing");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = leaf(
            vec!["sluice-client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        TlsFiles {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            other_ca: write("other-ca.pem", &other_pem),
            dir,
        }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed CA: its PEM and an issuer that signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("key generation");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key).expect("self-signing").pem();
    (pem, Issuer::new(params, key))
}

/// A `redis-server` with TLS on one port (and plain text on another, for the harness).
#[derive(Debug)]
pub struct TlsRedis {
    member: Member,
    tls_port: u16,
    dir: PathBuf,
}

impl TlsRedis {
    /// Starts a server presenting `files.server_cert`; with `require_client_cert` it accepts only
    /// clients presenting a certificate signed by `files.ca`.
    ///
    /// # Panics
    /// If `redis-server` is missing, lacks TLS support, or does not start.
    pub fn start(files: &TlsFiles, require_client_cert: bool) -> TlsRedis {
        which("redis-server");
        let mut last_error = String::new();
        for _ in 0..3 {
            let (plain, tls_port) = (free_port(), free_port());
            let dir = fresh_dir("tls-redis");
            let mut args = server_args(plain, &dir);
            let path = |p: &Path| p.display().to_string();
            args.extend([
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                path(&files.server_cert),
                "--tls-key-file".into(),
                path(&files.server_key),
                "--tls-ca-cert-file".into(),
                path(&files.ca),
                "--tls-auth-clients".into(),
                if require_client_cert { "yes" } else { "no" }.into(),
            ]);
            match Member::start("redis-server", args, plain) {
                Ok(member) => {
                    return TlsRedis {
                        member,
                        tls_port,
                        dir,
                    };
                }
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server with TLS (is it built with TLS?): {last_error}");
    }

    /// The TLS port.
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// The plain-text port (harness only).
    pub fn plain_port(&self) -> u16 {
        self.member.port()
    }

    /// `rediss://localhost:PORT/` (the name the server certificate carries).
    pub fn url(&self) -> String {
        format!("rediss://localhost:{}/", self.tls_port)
    }

    /// Runs `redis-cli` on the plain port.
    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.plain_port(), args)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        self.member.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
