//! Issue 35: keys that `object_store` cannot take as paths (a `.`, `..` or empty segment, a
//! control character; a leading `/`, which it strips) are anyone's to write. They are skipped
//! with one warning each, and the worker runs the other conversations.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_ast::TextEdit;
use flemma_core::Conversation;
use flemma_object::object_store::path::Path as ObjectPath;
use flemma_object::{Assignment, Bucket, ObjectConversation, Worker, WorkerOptions};
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span;

use crate::ok;
use crate::server::{bucket, server};

/// Puts `target` (the request target after `/BUCKET/`, sent as is: `..` and `.` are not
/// resolved as an HTTP client would) on the test server, unsigned, as moto allows.
fn put_raw(bucket: &str, target: &str, body: &str) {
    let address = server().endpoint.trim_start_matches("http://");
    let mut stream = ok(std::net::TcpStream::connect(address));
    ok(write!(
        stream,
        "PUT /{bucket}/{target} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut response = String::new();
    ok(stream.read_to_string(&mut response));
    let status = response.lines().next().unwrap_or_default();
    assert!(status.contains(" 200 "), "PUT {target}: {status}");
}

/// The warnings of this thread's events, their fields written out.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn taken(&self) -> Vec<String> {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        all.sort();
        all
    }
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(fields.0);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

const READY: &str = "@You:\nhi\n";

/// Answers the conversation (so that it is not ready any more) and records its URL.
async fn answer(
    assignment: Assignment,
    ran: Arc<Mutex<Vec<String>>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let chat = &assignment.conversation;
    let snap = chat.snapshot().await?;
    let end = u32::try_from(snap.text.lines().count())? + 1;
    let answer = vec![String::new(), "@Assistant:".into(), "hello".into()];
    chat.apply(
        snap.revision,
        &[TextEdit::insert(end, answer)],
        flemma_core::Durability::Durable,
    )
    .await?;
    ran.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(assignment.url.clone());
    Ok(())
}

/// Waits (20 seconds at most) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting: {what}");
}

/// Three conversations, and keys `object_store` cannot address beside them.
async fn fill(bucket: &Bucket) {
    for key in ["a.chat", "team/a.chat", "team/z.chat"] {
        drop(ok(
            ObjectConversation::create(bucket, &key.into(), READY).await
        ));
    }
    for target in [
        "team/../x.chat",
        "team/./y.chat",
        "team//e.chat",
        // ESC [ 3 1 m: the name must not colour the terminal it is shown on.
        "team/c%1B[31m.chat",
        // The key `/lead.chat`, which object_store lists as `lead.chat`.
        "/lead.chat",
    ] {
        put_raw(bucket.name(), target, READY);
    }
}

/// The warnings of each key skipped, once, and of `lead.chat`, once.
fn warned_once() -> Vec<String> {
    let bad = "a `.` or `..` segment or a control character";
    let skipped = |key: &str, why: &str| {
        format!("object key {key} skipped: it has {why}, which object_store cannot address")
    };
    vec![
        "conversation \"lead.chat\" listed but not found: a key with a leading or trailing \
         `/` is listed under this name and cannot be read through it (or the object was \
         deleted since); skipped"
            .to_owned(),
        skipped(r#""team/../x.chat""#, bad),
        skipped(r#""team/./late.chat""#, bad),
        skipped(r#""team/./y.chat""#, bad),
        skipped(r#""team//e.chat""#, "an empty segment"),
        skipped(r#""team/c\u{1b}[31m.chat""#, bad),
    ]
}

/// A look at the bucket costs this many LISTs once the worker knows where the keys it skips
/// are: each found in two or three pages, `[/lead.chat a.chat] ../x` `./y` `/e`
/// `[a.chat] c\x1b` `[z.chat]`.
const LATER_LOOK: u64 = 3 + 2 + 2 + 3 + 1;

/// A worker of a whole bucket that holds keys `object_store` cannot address starts, runs the
/// other conversations, goes on running new ones when another such key appears, and warns
/// once of each such key, its name escaped, however many times it looks.
#[tokio::test]
async fn a_worker_skips_the_keys_object_store_cannot_address_and_runs_the_others() {
    let warnings = Warnings::default();
    let _capture = tracing::subscriber::set_default(warnings.clone());
    let bucket = bucket().await;
    fill(&bucket).await;

    let worker = Worker::new(
        bucket.clone(),
        ObjectPath::from(""),
        WorkerOptions::new()
            .holder("w")
            .concurrency(4)
            .poll_interval(Duration::from_millis(20)),
    );
    let before = bucket.requests().list;
    let mut listed: Vec<String> = ok(worker.conversations().await)
        .into_iter()
        .map(|(key, _)| key.to_string())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        ["a.chat", "lead.chat", "team/a.chat", "team/z.chat"],
        "every key object_store can address is listed"
    );
    let first_look = bucket.requests().list - before;
    let before = bucket.requests().list;
    assert_eq!(ok(worker.conversations().await).len(), 4);
    assert_eq!(
        bucket.requests().list - before,
        LATER_LOOK,
        "the first look: {first_look} LISTs"
    );

    let ran = Arc::new(Mutex::new(Vec::new()));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (worker, ran, shutdown) = (worker.clone(), Arc::clone(&ran), shutdown.clone());
        let run = move |assignment| answer(assignment, Arc::clone(&ran));
        async move { worker.run(run, |_| {}, shutdown).await }
    });
    let count = || ran.lock().unwrap_or_else(PoisonError::into_inner).len();
    until("the three conversations run", || {
        count() == 3 || running.is_finished()
    })
    .await;
    assert!(!running.is_finished(), "the worker stopped");

    // Another such key appears, then a new conversation: the running worker runs it.
    put_raw(bucket.name(), "team/./late.chat", READY);
    drop(ok(ObjectConversation::create(
        &bucket,
        &"team/next.chat".into(),
        READY,
    )
    .await));
    until("the new conversation runs", || {
        count() == 4 || running.is_finished()
    })
    .await;
    // Some more looks at the bucket, each of them at every key (`late.chat` adds two LISTs).
    let lists = bucket.requests().list;
    until("more looks", || {
        bucket.requests().list > lists + 5 * (LATER_LOOK + 2)
    })
    .await;
    shutdown.cancel();
    ok(ok(running.await));

    let mut ran = ran.lock().unwrap_or_else(PoisonError::into_inner).clone();
    ran.sort();
    let url = |key: &str| bucket.url(&key.into());
    assert_eq!(
        ran,
        [
            url("a.chat"),
            url("team/a.chat"),
            url("team/next.chat"),
            url("team/z.chat")
        ]
    );
    assert_eq!(warnings.taken(), warned_once());
}
