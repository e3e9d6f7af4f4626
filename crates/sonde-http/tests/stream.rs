//! `/api/stream`: the current state first; a client that does not read skips updates instead of
//! holding the publisher; at most one event per resolution; a finished run's stream stays open.

mod common;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use sonde_http::{router, Access, Phase, RunState, Status, TrafficBin, Update, UpdateKind, UPDATE_BACKLOG};
use tower::ServiceExt;

/// Reads SSE events (`event:` name and `data:` JSON) from a body, one at a time.
struct Events {
    body: Body,
    buffer: String,
}

impl Events {
    async fn open(state: std::sync::Arc<RunState>, uri: &str) -> Events {
        let res = router(state, Access::Open).oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        Events { body: res.into_body(), buffer: String::new() }
    }

    /// The next event, or `None` if none came within `wait` (comments are skipped).
    async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |f: &str| block.lines().find_map(|l| l.strip_prefix(f)).map(str::to_string);
                let (Some(name), Some(data)) = (field("event: "), field("data: ")) else { continue };
                return Some((name, serde_json::from_str(&data).expect("JSON data")));
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame()).await.ok()?;
            let data = frame.expect("the stream does not end").expect("no body error").into_data().unwrap_or_default();
            self.buffer.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
}

fn update(packets: u64) -> Update {
    // One traffic bin per update, starting at `packets` seconds.
    let bins = vec![TrafficBin { start_s: packets as f64, packets: [packets, 0, 0, 0], bytes: [0; 4] }];
    Update { kind: UpdateKind::Tick, status: Status { packets, ..Status::default() }, interval: None, bins }
}

#[tokio::test]
async fn a_finished_run_sends_its_final_state_and_stays_open() {
    let mut events = Events::open(common::finished(), "/api/stream?resolution_ms=10").await;
    let (name, data) = events.next(Duration::from_secs(5)).await.expect("the final state");
    assert_eq!(name, "final");
    assert_eq!((data["status"]["packets"].as_u64(), data["interval"]["index"].as_u64()), (Some(38), Some(103)));
    // Nothing more, and the connection is still open (next() would panic on its end).
    assert!(events.next(Duration::from_millis(200)).await.is_none());
}

#[tokio::test]
async fn a_client_that_does_not_read_skips_and_never_holds_the_publisher() {
    let state = RunState::new(common::snapshot(Phase::Running));
    let mut events = Events::open(state.clone(), "/api/stream?resolution_ms=10").await;
    assert_eq!(events.next(Duration::from_secs(5)).await.unwrap().0, "tick");
    // Far more updates than the backlog, while the client reads nothing: publishing returns at
    // once each time.
    let published = 20 * UPDATE_BACKLOG as u64;
    let started = Instant::now();
    for i in 1..=published {
        state.send(update(i));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "publishing waited: {:?}", started.elapsed());
    // The client's next event is the newest update, and it says how many it skipped.
    let (_, data) = events.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(data["status"]["packets"].as_u64(), Some(published));
    assert_eq!(data["skipped"].as_u64(), Some(published - 1));
    assert!(events.next(Duration::from_millis(100)).await.is_none(), "skipped updates were sent after all");
}

#[tokio::test]
async fn at_most_one_event_per_resolution() {
    let state = RunState::new(common::snapshot(Phase::Running));
    let mut events = Events::open(state.clone(), "/api/stream?resolution_ms=200").await;
    events.next(Duration::from_secs(5)).await.unwrap();
    let publisher = {
        let state = state.clone();
        tokio::spawn(async move {
            for i in 1..=100 {
                state.send(update(i));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // About 1 s of updates every 10 ms: at 200 ms, about 5 events (never 100).
    let mut received = Vec::new();
    let mut bins = Vec::new();
    let started = Instant::now();
    while let Some((_, data)) = events.next(Duration::from_millis(600)).await {
        received.push(data["status"]["packets"].as_u64().unwrap());
        bins.extend(data["bins"].as_array().unwrap().iter().map(|b| b["start_s"].as_f64().unwrap() as u64));
        if received.last() == Some(&100) {
            break;
        }
    }
    publisher.await.unwrap();
    assert!((2..=8).contains(&received.len()), "{} events in {:?}: {received:?}", received.len(), started.elapsed());
    assert!(received.windows(2).all(|w| w[0] < w[1]), "{received:?}");
    assert_eq!(received.last(), Some(&100), "the newest update is never lost");
    // Coalesced updates keep their traffic bins: the chart misses none.
    assert_eq!(bins, (1..=100).collect::<Vec<u64>>());
}

#[tokio::test]
async fn publishing_a_snapshot_replaces_it_whole_and_streams_its_interval() {
    let state = RunState::new(common::snapshot(Phase::Running));
    let mut events = Events::open(state.clone(), "/api/stream?resolution_ms=10").await;
    events.next(Duration::from_secs(5)).await.unwrap();
    let mut next = common::snapshot(Phase::Finished);
    next.status.packets = 99;
    state.publish(next);
    let (name, data) = events.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!((name.as_str(), data["status"]["packets"].as_u64()), ("final", Some(99)));
    assert_eq!(state.snapshot().status.packets, 99);
    assert!(data.get("bins").is_none(), "the same bins again: {data}");
}

#[tokio::test]
async fn a_published_snapshot_streams_only_its_new_bins() {
    let state = RunState::new(common::snapshot(Phase::Running));
    let mut events = Events::open(state.clone(), "/api/stream?resolution_ms=10").await;
    let (_, first) = events.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first["bins"].as_array().map(Vec::len), Some(2), "a new client gets the bins kept: {first}");
    let mut next = common::snapshot(Phase::Running);
    next.live.bins.push_back(TrafficBin { start_s: 103.9, packets: [5, 0, 0, 0], bytes: [500, 0, 0, 0] });
    state.publish(next);
    let (_, data) = events.next(Duration::from_secs(5)).await.unwrap();
    let starts: Vec<f64> = data["bins"].as_array().unwrap().iter().map(|b| b["start_s"].as_f64().unwrap()).collect();
    assert_eq!(starts, [103.9]);
}

#[tokio::test]
async fn a_resolution_below_10_ms_is_refused() {
    let (code, body) = common::get(common::finished(), "/api/stream?resolution_ms=5").await;
    assert_eq!((code, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_query")));
}
