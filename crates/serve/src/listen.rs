//! The connection layer under the router: every socket a page or a process opens is bounded in
//! time and number, so that slow or silent clients cannot hold the server.
//!
//! - A request's head must arrive within [`Limits::header_timeout`]; the same clock runs while
//!   a keep-alive connection waits for its next request, so idle and half-sent (slowloris)
//!   connections close.
//! - At most [`Limits::max_connections`] are open. At the cap, or when accepting fails (no
//!   file descriptors left), the longest-idle connection (no request in flight) is closed to
//!   make room; a new client waits in the listen backlog only while every connection is busy.
//! - A client that closes its socket while its request waits or runs is noticed by hyper
//!   (half-closed connections are not kept): it drops the connection, with it the handler or
//!   the streamed body, and so the request ([`crate::stream`]), waiting or running.
//!
//! Body read and stream write limits are per request ([`crate::routes`], [`crate::stream`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// How long a connection closed to make room may take to finish what raced in.
const EVICTION_GRACE: Duration = Duration::from_millis(200);

/// Time and connection bounds of the server (flags of `tessera serve`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// A request head (and the wait for a keep-alive connection's next request) must arrive
    /// within this.
    pub header_timeout: Duration,
    /// A body must arrive within this plus its length at [`Limits::body_min_rate`].
    pub body_timeout: Duration,
    /// Bytes per second a body must at least arrive at.
    pub body_min_rate: u64,
    /// A streamed answer whose client reads nothing for this long is dropped (and its
    /// generation cancelled).
    pub write_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            body_min_rate: 1 << 20,
            write_timeout: Duration::from_secs(30),
            max_connections: 256,
        }
    }
}

impl Limits {
    /// How long a body of `len` bytes may take to arrive.
    pub fn body_deadline(&self, len: u64) -> Duration {
        self.body_timeout + Duration::from_secs(len / self.body_min_rate.max(1))
    }
}

/// One open connection: its requests in flight (a streamed answer counts until its body is
/// dropped) and when it last went idle.
struct Connection {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
    /// Asked to close (to make room).
    close: Notify,
    /// Its place under the cap, handed to a new connection when this one is closed to make
    /// room (it closes within [`EVICTION_GRACE`]).
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

/// The open connections, by number.
#[derive(Default)]
struct Connections {
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
    next: AtomicU64,
}

impl Connections {
    fn add(&self, permit: OwnedSemaphorePermit) -> (u64, Arc<Connection>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            close: Notify::new(),
            permit: Mutex::new(Some(permit)),
        });
        self.open.lock().unwrap().insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.open.lock().unwrap().remove(&id);
    }

    /// Asks the longest-idle connection to close, taking its place under the cap.
    fn close_longest_idle(&self) -> Option<OwnedSemaphorePermit> {
        let open = self.open.lock().unwrap();
        let idle = open
            .values()
            .filter(|c| c.in_flight.load(Ordering::Acquire) == 0)
            .filter(|c| c.permit.lock().unwrap().is_some())
            .min_by_key(|c| *c.idle_since.lock().unwrap())?;
        idle.close.notify_one();
        let permit = idle.permit.lock().unwrap().take();
        permit
    }
}

/// Counts a request in flight on its connection until its response body is dropped.
struct InFlight(Arc<Connection>);

impl InFlight {
    fn enter(conn: Arc<Connection>) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap() = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Middleware: marks the connection busy for the life of the request and its response body.
async fn track(req: Request, next: Next) -> Response {
    let guard = req
        .extensions()
        .get::<Arc<Connection>>()
        .cloned()
        .map(InFlight::enter);
    let res = next.run(req).await;
    match guard {
        None => res,
        Some(guard) => res.map(|body| axum::body::Body::new(Tracked { body, _busy: guard })),
    }
}

/// A response body that holds its connection busy until dropped (its size hint kept, so that
/// a whole answer still goes out with its `Content-Length`).
struct Tracked {
    body: axum::body::Body,
    _busy: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves `app` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let app = app.layer(axum::middleware::from_fn(track));
    let connections = Arc::new(Connections::default());
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        // At the cap: take the place of an idle connection, else wait for one to end.
        let free = permits.clone().try_acquire_owned().ok();
        let permit = match free.or_else(|| connections.close_longest_idle()) {
            Some(p) => p,
            None => tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("the semaphore stays open"),
                () = &mut shutdown => return,
            },
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors (or another transient failure): free one if an idle
                // connection holds it, and try again shortly instead of spinning.
                eprintln!("accept failed: {e}");
                drop(permit);
                drop(connections.close_longest_idle());
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, conn) = connections.add(permit);
        let connections = connections.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let service = {
                let conn = conn.clone();
                app.map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(conn.clone());
                    req
                })
            };
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = conn.close.notified() => {
                    // No request in flight when chosen: an idle keep-alive closes at once; one
                    // still sending its head (maybe never, a slowloris) is dropped shortly.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(EVICTION_GRACE, connection).await;
                }
            }
            connections.remove(id);
        });
    }
}
