//! The loopback-only `/metrics` endpoint (`metrics.listen`), for hosts without
//! node_exporter: a Prometheus on the host itself (or an SSH tunnel, or a local agent that
//! forwards) scrapes it.
//!
//! Why hand-written rather than hyper: Prometheus sends one `GET /metrics` per scrape and
//! reads one response; an HTTP/1.1 responder that reads the request head, answers and closes
//! the connection is ~100 lines, needs no new dependency tree in a root daemon, and is
//! bounded (head size, read timeout, one connection at a time per scrape).
//!
//! Only loopback addresses are accepted ([`crate::config::check_listen`]): the metrics name devices, ports,
//! targets' states and the daemon's health, the endpoint has no authentication, and a root
//! daemon must not open a port to the network because of a configuration typo.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Metrics;

/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 8192;
/// A client that sends no complete head within this is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A client that does not take the response within this is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections answered at once; more are closed unanswered (a scraper needs one).
const MAX_CONNECTIONS: usize = 8;

/// Binds the endpoint; refuses a non-loopback address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::config::check_listen(&addr)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
    TcpListener::bind(addr).await
}

/// Serves `metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Metrics) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::debug!(%peer, "metrics request refused: {MAX_CONNECTIONS} in progress");
                    continue;
                };
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    if let Err(e) = answer(stream, &metrics).await {
                        tracing::debug!(%peer, "metrics request: {e}");
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                // EMFILE and the like: wait instead of spinning.
                tracing::warn!("metrics endpoint: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    Metrics { head_only: bool },
    NotFound,
    BadMethod,
    Bad,
}

/// Reads the request line of `head` (pure).
fn parse(head: &[u8]) -> Ask {
    let Some(line) = head.split(|b| *b == b'\n').next() else {
        return Ask::Bad;
    };
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ask::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Ask::Bad;
    }
    let path = target.split('?').next().unwrap_or(target);
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Ask::Metrics {
            head_only: method == "HEAD",
        },
        ("GET" | "HEAD", _) => Ask::NotFound,
        _ => Ask::BadMethod,
    }
}

async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(head);
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Ok(head);
        }
    }
}

async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let head = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request head"))??;
    let (status, content_type, body, head_only) = match parse(&head) {
        // Encoded on the blocking pool, as the textfile is: the daemon's loop shares this
        // thread.
        Ask::Metrics { head_only } => (
            "200 OK",
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            {
                let m = metrics.clone();
                tokio::task::spawn_blocking(move || m.encode())
                    .await
                    .map_err(std::io::Error::other)?
            },
            head_only,
        ),
        Ask::NotFound => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "iser-guard serves /metrics only\n".to_string(),
            false,
        ),
        Ask::BadMethod => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_string(),
            false,
        ),
        Ask::Bad => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            "not an HTTP/1 request\n".to_string(),
            false,
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    if status.starts_with("405") {
        response.push_str("Allow: GET, HEAD\r\n");
    }
    response.push_str("\r\n");
    if !head_only {
        response.push_str(&body);
    }
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "response not taken"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_may_be_listened_on() {
        for ok in ["127.0.0.1:9464", "127.1.2.3:1", "[::1]:9464"] {
            assert!(
                crate::config::check_listen(&ok.parse().unwrap()).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "0.0.0.0:9464",
            "192.0.2.1:9464",
            "[::]:9464",
            "[2001:db8::1]:80",
        ] {
            let e = crate::config::check_listen(&bad.parse().unwrap()).unwrap_err();
            assert!(e.contains("not a loopback address"), "{e}");
        }
    }

    #[test]
    fn request_lines_are_read_without_panicking() {
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ask::Metrics { head_only: false }
        );
        assert_eq!(
            parse(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Ask::Metrics { head_only: true }
        );
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Ask::NotFound);
        assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n\r\n"), Ask::BadMethod);
        for bad in [
            &b""[..],
            b"\xff\xfe",
            b"GET",
            b"GET /metrics SPDY/3\r\n\r\n",
        ] {
            assert_eq!(parse(bad), Ask::Bad);
        }
    }

    #[tokio::test]
    async fn a_non_loopback_bind_is_refused_before_any_socket_is_opened() {
        let e = bind("0.0.0.0:0".parse().unwrap()).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    }
}
