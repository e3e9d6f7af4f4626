//! The server's connections: accepted up to a cap, each with a header-read timeout and an idle
//! timeout, and a request head no larger than a bound (431 beyond). A connection that has not yet
//! had a request through the gate (token, `Host`) is *untrusted*: when the cap is reached, a new
//! connection takes the place of the oldest untrusted one, so a crowd of idle or unauthenticated
//! sockets never keeps a token holder out. When every slot is trusted, a new connection is
//! answered 503 and closed. Each outcome is counted ([`ConnectionStats`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::state::{ExportCounter, ExportCounters};

/// What the server allows each client and all of them together. [`Limits::default`] holds the
/// documented defaults (docs/security.md); the binary's `--http-*` flags change them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// `/api/stream` clients at once (503 beyond).
    pub max_streams: usize,
    /// A request's head (request line and headers) must arrive whole within this.
    pub header_timeout: Duration,
    /// A connection on which nothing is read or written for this long is closed (between
    /// requests, or a stream client that stopped reading).
    pub idle_timeout: Duration,
    /// Largest request head (431 beyond); at least 8 KiB.
    pub max_header_bytes: usize,
    /// Largest request body (413 beyond).
    pub max_body_bytes: usize,
    /// Definitions a live run counts at once; an addition beyond is refused (409).
    pub max_definitions: usize,
    /// Flow-log queries (filter, sort) running at once, off the server's async workers; more
    /// wait their turn.
    pub max_flow_queries: usize,
    /// Points one `/api/store/series` answer holds at most (413 `too_many_points` beyond).
    pub max_store_points: usize,
}

/// Defaults: nginx closes a slow header after 60 s and an idle keep-alive after 75 s; sonde's
/// clients are a dashboard and scrapers, so the bounds are tighter.
impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            max_streams: 32,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 64 * 1024,
            max_definitions: 64,
            max_flow_queries: 2,
            max_store_points: 10_000,
        }
    }
}

/// Smallest head buffer hyper takes.
pub const MIN_HEADER_BYTES: usize = 8 * 1024;

/// The connections' outcomes so far.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Connections accepted and served.
    pub accepted: AtomicU64,
    /// Connections refused (503) because every slot held a trusted connection.
    pub refused: AtomicU64,
    /// Untrusted connections closed to make room for a new one.
    pub evicted: AtomicU64,
    /// Connections closed by the header or idle timeout.
    pub timed_out: AtomicU64,
}

impl ConnectionStats {
    /// For `/metrics` ([`crate::RunState::add_export_counters`]):
    /// `sonde_http_connections_total{outcome}`.
    pub fn counters(self: &Arc<Self>) -> ExportCounters {
        let stats = self.clone();
        Box::new(move || {
            let c = |outcome: &'static str, v: &AtomicU64| ExportCounter {
                name: "sonde_http_connections_total",
                help: "Connections to the HTTP server, by outcome (accepted; refused at the cap; evicted \
                       (untrusted, for a newer one); timed_out)",
                labels: vec![("outcome", outcome)],
                value: v.load(Ordering::Relaxed),
            };
            vec![
                c("accepted", &stats.accepted),
                c("refused", &stats.refused),
                c("evicted", &stats.evicted),
                c("timed_out", &stats.timed_out),
            ]
        })
    }
}

/// One open connection's place.
struct Slot {
    trusted: Arc<AtomicBool>,
    evict: Arc<Notify>,
}

/// The open connections, oldest first.
struct Slots {
    cap: usize,
    next: u64,
    open: BTreeMap<u64, Slot>,
}

/// A connection's hold on its slot, given back when dropped.
struct Ticket {
    id: u64,
    slots: Arc<Mutex<Slots>>,
    trusted: Arc<AtomicBool>,
    evict: Arc<Notify>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        lock(&self.slots).open.remove(&self.id);
    }
}

fn lock(slots: &Mutex<Slots>) -> std::sync::MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(|e| e.into_inner())
}

/// A slot for a new connection: a free one, else the oldest untrusted connection's (told to
/// close), else none.
fn admit(slots: &Arc<Mutex<Slots>>, stats: &ConnectionStats) -> Option<Ticket> {
    let mut s = lock(slots);
    if s.open.len() >= s.cap {
        let oldest = s.open.iter().find(|(_, slot)| !slot.trusted.load(Ordering::Acquire)).map(|(&id, _)| id)?;
        if let Some(slot) = s.open.remove(&oldest) {
            slot.evict.notify_one();
            stats.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
    let id = s.next;
    s.next += 1;
    let (trusted, evict) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
    s.open.insert(id, Slot { trusted: trusted.clone(), evict: evict.clone() });
    Some(Ticket { id, slots: slots.clone(), trusted, evict })
}

/// The answer to a connection over the cap: written if the socket takes it at once, never
/// waited for.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\n\
retry-after: 1\r\ncontent-length: 81\r\n\r\n{\"error\":\"too_many_connections\",\"message\":\"the server is at its connection cap\"}\n";

/// Refusals lingering at once; beyond, a refused connection is closed without an answer.
const MAX_REFUSING: u64 = 32;
/// How long a refused connection's request is read (so that closing sends a FIN, not a reset
/// that could destroy the answer before the client reads it).
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Answers 503 and closes, reading the client's request for a moment first; a bounded number at
/// once, so that a flood of refusals holds few descriptors.
fn refuse(stream: TcpStream, refusing: &Arc<AtomicU64>) {
    if stream.try_write(REFUSED).is_err() {
        return;
    }
    if refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let refusing = refusing.clone();
    tokio::spawn(async move {
        let mut stream = stream;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let _ = stream.shutdown().await;
            let mut sink = [0u8; 1024];
            let mut read = 0;
            while read < 16 * 1024 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
        })
        .await;
        refusing.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Serves `app` on `listener` with `limits` until `shutdown` completes, then lets the answers in
/// progress finish (the caller bounds how long).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: &Limits,
    stats: Arc<ConnectionStats>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .max_headers(100);
    let slots = Arc::new(Mutex::new(Slots { cap: limits.max_connections.max(1), next: 0, open: BTreeMap::new() }));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let refusing = Arc::new(AtomicU64::new(0));
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors (EMFILE) or a connection reset before it was taken: the
                // listener stays, and a short pause keeps the loop from spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(ticket) = admit(&slots, &stats) else {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            refuse(stream, &refusing);
            continue;
        };
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let trusted = ticket.trusted.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let (app, trusted) = (app.clone(), trusted.clone());
            async move {
                let answer = app.oneshot(req.map(axum::body::Body::new)).await;
                // Past the gate of the API: a token holder, or (tokenless) a loopback client
                // naming loopback. The dashboard's open files do not count.
                if answer.as_ref().is_ok_and(|a| a.extensions().get::<crate::auth::Passed>().is_some()) {
                    trusted.store(true, Ordering::Release);
                }
                answer
            }
        });
        let idle = Idle::new(stream, limits.idle_timeout);
        let timed_out = idle.timed_out.clone();
        let conn = graceful.watch(http.serve_connection(TokioIo::new(idle), service));
        let stats = stats.clone();
        tokio::spawn(async move {
            let evict = ticket.evict.clone();
            tokio::select! {
                result = conn => {
                    let header_timeout = result.as_ref().err().is_some_and(|e| e.is_timeout());
                    if header_timeout || timed_out.load(Ordering::Relaxed) {
                        stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    }
                }
                () = evict.notified() => {}
            }
            drop(ticket);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A socket closed when nothing was read or written on it for `timeout`.
struct Idle {
    inner: TcpStream,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
    timed_out: Arc<AtomicBool>,
}

impl Idle {
    fn new(inner: TcpStream, timeout: Duration) -> Idle {
        let deadline = Box::pin(tokio::time::sleep(timeout));
        Idle { inner, timeout, deadline, timed_out: Arc::new(AtomicBool::new(false)) }
    }

    fn moved(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.timeout);
    }

    /// Pending: still pending unless the deadline has passed (then an error closes the
    /// connection).
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.timed_out.store(true, Ordering::Relaxed);
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "idle connection")))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Idle {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.waiting(cx),
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, data) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.moved();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.waiting(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.waiting(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.moved();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.waiting(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_answer() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head.split("content-length: ").nth(1).unwrap().trim().parse().unwrap();
        assert_eq!(body.len(), len);
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }

    #[test]
    fn a_full_house_gives_the_oldest_untrusted_slot() {
        let stats = ConnectionStats::default();
        let slots = Arc::new(Mutex::new(Slots { cap: 2, next: 0, open: BTreeMap::new() }));
        let a = admit(&slots, &stats).unwrap();
        let b = admit(&slots, &stats).unwrap();
        a.trusted.store(true, Ordering::Release);
        let c = admit(&slots, &stats).unwrap();
        assert_eq!(stats.evicted.load(Ordering::Relaxed), 1);
        assert!(!lock(&slots).open.contains_key(&b.id), "b, untrusted, made room");
        c.trusted.store(true, Ordering::Release);
        assert!(admit(&slots, &stats).is_none(), "all trusted: refused");
        drop(a);
        assert!(admit(&slots, &stats).is_some());
    }
}
