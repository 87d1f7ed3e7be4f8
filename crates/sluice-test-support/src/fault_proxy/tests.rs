//! Each fault, against an echo server.

use super::*;
use std::time::Instant;

/// An upstream that answers each chunk it reads with the same bytes.
fn echo_server() -> (u16, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    if stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, handle)
}

fn client(proxy: &FaultProxy) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

/// Sends `message` and reads until as many bytes came back, the stream ended, or it failed.
fn round_trip(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(message)?;
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < message.len() {
        match stream.read(&mut buf)? {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    Ok(got)
}

#[test]
fn passes_bytes_through_and_delays_them() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut c = client(&proxy);
    assert_eq!(round_trip(&mut c, b"hello").unwrap(), b"hello");
    proxy.set(Fault::Delay(Duration::from_millis(150)));
    let started = Instant::now();
    assert_eq!(round_trip(&mut c, b"again").unwrap(), b"again");
    assert!(started.elapsed() >= Duration::from_millis(300), "both ways");
}

#[test]
fn a_reset_closes_open_and_new_connections_until_it_ends() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut open = client(&proxy);
    assert_eq!(round_trip(&mut open, b"x").unwrap(), b"x");
    proxy.set(Fault::Reset);
    assert!(!matches!(round_trip(&mut open, b"y"), Ok(v) if v == b"y"));
    assert!(!matches!(round_trip(&mut client(&proxy), b"z"), Ok(v) if v == b"z"));
    proxy.set(Fault::None);
    assert_eq!(round_trip(&mut client(&proxy), b"back").unwrap(), b"back");
    assert_eq!(proxy.accepted(), 3);
}

#[test]
fn a_stall_holds_bytes_and_delivers_them_in_order_when_it_ends() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut c = client(&proxy);
    assert_eq!(round_trip(&mut c, b"a").unwrap(), b"a");
    proxy.set(Fault::Stall);
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let stalled = round_trip(&mut c, b"held");
    assert!(
        stalled
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::WouldBlock),
        "{stalled:?}"
    );
    proxy.set(Fault::None);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"held");
}

#[test]
fn a_cut_reply_arrives_in_part_and_the_connection_ends() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut c = client(&proxy);
    proxy.set(Fault::CutReply);
    let got = round_trip(&mut c, b"0123456789").unwrap_or_default();
    assert!(got.len() < 10 && b"0123456789".starts_with(&got), "{got:?}");
    let next = round_trip(&mut c, b"more");
    assert!(!matches!(next, Ok(v) if v == b"more"));
}

#[test]
fn a_blackhole_swallows_everything_and_resets_what_it_swallowed_from() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut c = client(&proxy);
    proxy.set(Fault::Blackhole);
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(round_trip(&mut c, b"lost").is_err());
    proxy.set(Fault::None);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let after = round_trip(&mut c, b"gone");
    assert!(!matches!(after, Ok(v) if v == b"gone"), "never resumed");
    assert_eq!(round_trip(&mut client(&proxy), b"new").unwrap(), b"new");
}

#[test]
fn a_trickle_answers_one_byte_at_a_time() {
    let (upstream, _) = echo_server();
    let proxy = FaultProxy::start(upstream);
    let mut c = client(&proxy);
    proxy.set(Fault::Trickle(Duration::from_millis(40)));
    let started = Instant::now();
    assert_eq!(round_trip(&mut c, b"12345").unwrap(), b"12345");
    assert!(started.elapsed() >= Duration::from_millis(200));
}
