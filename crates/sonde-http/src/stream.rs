//! `/api/stream`: Server-Sent Events of the run's updates, at most one per `resolution_ms`.
//! A client that reads slowly skips updates (the broadcast drops its oldest, and the updates
//! queued while it waited are coalesced into the newest); the publisher never waits for it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use serde::Serialize;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;
use tokio::time::Instant;
use tokio_stream::Stream;

use crate::state::{RunState, Update, UpdateKind};

/// The finest resolution served.
pub const MIN_RESOLUTION_MS: u64 = 10;

/// A keep-alive comment at least this often (more often when the idle timeout is shorter).
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event's data.
#[derive(Debug, Serialize)]
pub struct StreamEvent<'a> {
    #[serde(flatten)]
    pub update: &'a Update,
    /// Updates this client has skipped so far (fell behind, or coalesced).
    pub skipped: u64,
}

struct Client {
    /// Held so the sender outlives the client: a finished run's stream stays open.
    _state: Arc<RunState>,
    rx: Receiver<Arc<Update>>,
    first: Option<Update>,
    resolution: Duration,
    last_sent: Option<Instant>,
    skipped: u64,
    /// The client's place among `max_streams`, given back when it leaves.
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Client {
    async fn next(&mut self) -> Option<Event> {
        if let Some(u) = self.first.take() {
            return Some(self.event(&u));
        }
        if let Some(t) = self.last_sent {
            tokio::time::sleep_until(t + self.resolution).await;
        }
        let latest = loop {
            match self.rx.recv().await {
                Ok(u) => break u,
                Err(RecvError::Lagged(n)) => self.skipped += n,
                // Cannot happen while `_state` holds the sender; ends the stream if it does.
                Err(RecvError::Closed) => return None,
            }
        };
        // Updates queued meanwhile are coalesced into the newest, their traffic bins kept.
        let mut bins = latest.bins.clone();
        let mut latest = latest;
        loop {
            match self.rx.try_recv() {
                Ok(u) => {
                    self.skipped += 1;
                    bins.extend_from_slice(&u.bins);
                    latest = u;
                }
                Err(TryRecvError::Lagged(n)) => self.skipped += n,
                Err(_) => break,
            }
        }
        if bins.len() == latest.bins.len() {
            return Some(self.event(&latest));
        }
        let merged = Update { bins, ..(*latest).clone() };
        Some(self.event(&merged))
    }

    fn event(&mut self, u: &Update) -> Event {
        self.last_sent = Some(Instant::now());
        let name = match u.kind {
            UpdateKind::Interval => "interval",
            UpdateKind::Tick => "tick",
            UpdateKind::Final => "final",
        };
        let data = serde_json::to_string(&StreamEvent { update: u, skipped: self.skipped }).unwrap_or_default();
        Event::default().event(name).data(data)
    }
}

/// The stream for one client: first the current state (`final` on a finished run), then the
/// updates; a finished run's stream stays open (keep-alive comments) until the client leaves.
pub fn events(
    state: &Arc<RunState>,
    resolution_ms: u64,
    permit: impl Into<Option<tokio::sync::OwnedSemaphorePermit>>,
    keep_alive: Duration,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.subscribe();
    let snap = state.snapshot();
    let kind = match snap.status.state {
        crate::snapshot::Phase::Finished => UpdateKind::Final,
        crate::snapshot::Phase::Running => UpdateKind::Tick,
    };
    let first = Update {
        kind,
        status: snap.status.clone(),
        interval: snap.intervals.items.last().cloned(),
        bins: snap.live.bins.iter().copied().collect(),
    };
    let client = Client {
        _state: state.clone(),
        rx,
        first: Some(first),
        resolution: Duration::from_millis(resolution_ms.max(MIN_RESOLUTION_MS)),
        last_sent: None,
        skipped: 0,
        _permit: permit.into(),
    };
    let stream = futures_util::stream::unfold(client, |mut c| async move {
        let ev = c.next().await?;
        Some((Ok(ev), c))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(keep_alive.max(Duration::from_secs(1))))
}
