//! flemma-object against a real S3-compatible server (moto's, on 127.0.0.1).

mod ids;
mod journal;
mod keys;
mod layout;
mod server;

use std::sync::Arc;
use std::time::Duration;

use flemma_ast::TextEdit;
use flemma_core::{Conversation, ConversationError, Durability};
use flemma_object::object_store::path::Path as ObjectPath;
use flemma_object::object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use flemma_object::{Acquired, Lease, ObjectConversation, ObjectError, Worker, WorkerOptions};
use server::bucket;

pub(crate) fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// The server itself first: of 16 conditional creates of one key sent at once, exactly one
/// wins and the others are refused as "already exists" (20 rounds).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_sixteen_conditional_creates_of_one_key_exactly_one_wins() {
    let bucket = bucket().await;
    for round in 0..20 {
        let key = ObjectPath::from(format!("race/{round}"));
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let mut tasks = tokio::task::JoinSet::new();
        for writer in 0..16 {
            let (bucket, key, barrier) = (bucket.clone(), key.clone(), Arc::clone(&barrier));
            tasks.spawn(async move {
                barrier.wait().await;
                let opts = PutOptions {
                    mode: PutMode::Create,
                    ..PutOptions::default()
                };
                let put = bucket
                    .store()
                    .put_opts(&key, PutPayload::from(format!("writer {writer}")), opts)
                    .await;
                match put {
                    Ok(_) => Some(writer),
                    Err(flemma_object::object_store::Error::AlreadyExists { .. }) => None,
                    Err(e) => panic!("writer {writer}: {e}"),
                }
            });
        }
        let winners: Vec<usize> = tasks.join_all().await.into_iter().flatten().collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let got = ok(bucket.store().get(&key).await);
        let text = String::from_utf8(ok(got.bytes().await).to_vec()).unwrap_or_default();
        assert_eq!(
            text,
            format!("writer {}", winners[0]),
            "the winner's content is kept"
        );
    }
}

/// Appends `line` at the end, computing the edit again whenever the other writer got there
/// first: the executor's loop.
async fn append(chat: &ObjectConversation, line: &str, durability: Durability) -> usize {
    let mut stale = 0;
    loop {
        let snap = ok(chat.snapshot().await);
        let at = snap.text.lines().count() as u32 + 1;
        match chat
            .apply(
                snap.revision,
                &[TextEdit::insert(at, vec![line.to_owned()])],
                durability,
            )
            .await
        {
            Ok(_) => return stale,
            Err(ConversationError::Stale { .. }) => stale += 1,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Two writers (two hosts' views of one object) append 40 lines each at once: every line is
/// in the object at the end, in each writer's order, and the writers did see each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_racing_on_one_object_lose_no_edit() {
    let bucket = bucket().await;
    let key = ObjectPath::from("team/race.chat");
    drop(ok(
        ObjectConversation::create(&bucket, &key, "@You:\n").await
    ));
    let run = |name: &'static str| {
        let (bucket, key) = (bucket.clone(), key.clone());
        tokio::spawn(async move {
            let chat = ok(ObjectConversation::open(&bucket, &key).await);
            let mut stale = 0;
            for i in 0..40 {
                stale += append(&chat, &format!("{name} {i}"), Durability::Durable).await;
            }
            stale
        })
    };
    let (a, b) = (run("a"), run("b"));
    let stale = ok(a.await) + ok(b.await);
    let text = ok(ok(ObjectConversation::open(&bucket, &key).await)
        .snapshot()
        .await)
    .text;
    for name in ["a", "b"] {
        let mine: Vec<&str> = text.lines().filter(|l| l.starts_with(name)).collect();
        let expected: Vec<String> = (0..40).map(|i| format!("{name} {i}")).collect();
        assert_eq!(mine, expected, "{name}'s lines, each once, in order");
    }
    assert_eq!(text.lines().count(), 81);
    assert!(stale > 0, "the writers never raced (no stale apply)");
}

/// A response's lines appended as `Buffered` are one put at `sync`, not one each; the text
/// before them is never rewritten by another writer's loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_appends_are_one_put_at_sync_and_refused_over_another_writers_change() {
    let bucket = bucket().await;
    let key = ObjectPath::from("buffered.chat");
    let chat = ok(ObjectConversation::create(&bucket, &key, "@You:\nhi\n").await);
    let before = bucket.requests();
    for i in 0..10 {
        append(&chat, &format!("line {i}"), Durability::Buffered).await;
    }
    let during = bucket.requests();
    assert_eq!(during.put, before.put, "nothing is put while buffered");
    ok(chat.sync().await);
    assert_eq!(bucket.requests().put, before.put + 1, "one put at sync");
    let other = ok(ObjectConversation::open(&bucket, &key).await);
    assert_eq!(ok(other.snapshot().await).text.lines().count(), 12);

    // Buffered lines, then another writer changes the object: sync refuses, the other
    // writer's text stays, and the conversation reads it from then on.
    append(&chat, "lost line", Durability::Buffered).await;
    append(&other, "the other writer", Durability::Durable).await;
    let refused = chat.sync().await;
    assert!(
        matches!(refused, Err(ConversationError::Remote { .. })),
        "{refused:?}"
    );
    let text = ok(chat.snapshot().await).text;
    assert!(text.ends_with("the other writer\n"), "{text}");
    assert!(!text.contains("lost line"));
}

/// The lease: one holder at a time; renewals; a released lease is free at once, an expired
/// one only after its time; the host that lost it cannot renew, release or write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_and_is_taken_over_only_when_released_or_expired() {
    let bucket = bucket().await;
    let key = ObjectPath::from("leased.chat");
    let chat = ok(ObjectConversation::create(&bucket, &key, "@You:\nhi\n").await);
    let ttl = Duration::from_millis(1500);
    let Acquired::Held { lease: a, previous } = ok(Lease::acquire(&bucket, &key, "a", ttl).await)
    else {
        panic!("the first host takes the lease");
    };
    assert!(previous.is_none());
    assert!(matches!(
        ok(Lease::acquire(&bucket, &key, "b", ttl).await),
        Acquired::Busy(Some(ref r)) if r.holder == "a"
    ));
    ok(a.renew().await);
    ok(a.release().await);
    let Acquired::Held { lease: b, previous } = ok(Lease::acquire(&bucket, &key, "b", ttl).await)
    else {
        panic!("a released lease is free");
    };
    assert!(previous.is_none(), "a released lease is no dead holder's");
    let b = Arc::new(b);
    let chat = chat.with_lease(Arc::clone(&b));
    append(&chat, "b writes", Durability::Durable).await;

    // b stops renewing (it is cut off); c waits for the expiry, then takes over.
    assert!(matches!(
        ok(Lease::acquire(&bucket, &key, "c", ttl).await),
        Acquired::Busy(_)
    ));
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let Acquired::Held { lease: c, previous } = ok(Lease::acquire(&bucket, &key, "c", ttl).await)
    else {
        panic!("an expired lease is taken over");
    };
    assert_eq!(previous.map(|p| p.holder).as_deref(), Some("b"));
    assert!(matches!(b.check(), Err(ObjectError::LeaseLost { .. })));
    assert!(matches!(
        b.renew().await,
        Err(ObjectError::LeaseLost { .. })
    ));
    assert!(matches!(
        b.release().await,
        Err(ObjectError::LeaseLost { .. })
    ));
    let snap = ok(chat.snapshot().await);
    let refused = chat
        .apply(
            snap.revision,
            &[TextEdit::insert(1, vec!["x".into()])],
            Durability::Durable,
        )
        .await;
    assert!(
        matches!(refused, Err(ConversationError::Remote { .. })),
        "{refused:?}"
    );
    ok(c.release().await);
    let record =
        ok(flemma_object::read_lease(&bucket, &key).await).unwrap_or_else(|| panic!("lease"));
    assert!(record.released && record.holder == "c");
}

/// Sixteen hosts race for one free lease: exactly one holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_sixteen_hosts_racing_for_a_lease_one_holds_it() {
    let bucket = bucket().await;
    for round in 0..5 {
        let key = ObjectPath::from(format!("r{round}.chat"));
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let mut tasks = tokio::task::JoinSet::new();
        for host in 0..16 {
            let (bucket, key, barrier) = (bucket.clone(), key.clone(), Arc::clone(&barrier));
            tasks.spawn(async move {
                barrier.wait().await;
                let acquired =
                    ok(
                        Lease::acquire(&bucket, &key, &format!("h{host}"), Duration::from_secs(30))
                            .await,
                    );
                matches!(acquired, Acquired::Held { .. })
            });
        }
        let held = tasks.join_all().await.into_iter().filter(|h| *h).count();
        assert_eq!(held, 1, "round {round}");
    }
}

const IN_PROGRESS: &str = "@You:\nRun it.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n\n```json\n{\"command\": \"make\"}\n```\n\n@You:\n**Tool Result:** `toolu_1`\n\n```\n```\n";

/// A worker finds a conversation whose holder died with a call in progress (its lease
/// expired, not released): it takes the lease over, answers the call with the lost-call
/// error before its runner sees the conversation, and releases the lease after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_answers_the_calls_a_dead_holder_left_in_progress() {
    let bucket = bucket().await;
    let key = ObjectPath::from("p/dead.chat");
    drop(ok(
        ObjectConversation::create(&bucket, &key, IN_PROGRESS).await
    ));
    // The dead holder's lease, expired.
    let Acquired::Held { lease, .. } =
        ok(Lease::acquire(&bucket, &key, "dead", Duration::from_millis(200)).await)
    else {
        panic!("lease");
    };
    std::mem::forget(lease);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Finished conversations are not picked.
    drop(ok(ObjectConversation::create(
        &bucket,
        &"p/done.chat".into(),
        "@You:\nhi\n\n@Assistant:\nhello\n",
    )
    .await));

    let worker = Worker::new(
        bucket.clone(),
        "p".into(),
        WorkerOptions::new()
            .holder("w1")
            .poll_interval(Duration::from_millis(50)),
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let finished = Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = {
        let (seen, shutdown) = (Arc::clone(&seen), shutdown.clone());
        move |assignment: flemma_object::Assignment| {
            let (seen, shutdown) = (Arc::clone(&seen), shutdown.clone());
            async move {
                let text = assignment.conversation.snapshot().await?.text;
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((assignment.url.clone(), assignment.recovered.clone(), text));
                shutdown.cancel();
                Ok(())
            }
        }
    };
    let done = Arc::clone(&finished);
    tokio::time::timeout(
        Duration::from_secs(20),
        worker.run(
            run,
            move |f| {
                done.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(f);
            },
            shutdown,
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("the worker did not stop"))
    .unwrap_or_else(|e| panic!("{e}"));
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(seen.len(), 1, "only the ready conversation is run");
    let (url, recovered, text) = &seen[0];
    assert_eq!(url, &bucket.url(&key));
    assert_eq!(recovered, &["toolu_1".to_owned()]);
    assert!(
        text.contains("**Tool Result:** `toolu_1` (error)")
            && text.contains("Tool execution lost: session ended before completion. It may have run in part; check before retrying."),
        "{text}"
    );
    let record =
        ok(flemma_object::read_lease(&bucket, &key).await).unwrap_or_else(|| panic!("lease"));
    assert!(record.released && record.holder == "w1", "{record:?}");
    let finished = finished
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(finished.len(), 1);
    assert!(finished[0].error.is_none(), "{:?}", finished[0].error);
    assert_eq!(finished[0].recovered, 1);
}
