//! Runs the conversations kept in a bucket with a `Worker`, as a service embeds it: each
//! conversation under its lease, its own session, the built-in tools working in the
//! conversation's directory on this machine.
//!
//! ```text
//! cargo run --example worker --features object-store
//! ```
//!
//! Offline: the bucket is `object_store`'s in-memory store and the model a script (swap in
//! `Bucket::from_env("chats")?`, which reads the `AWS_*` variables, for S3 or a compatible
//! server, and `HttpProvider::from_env(…)` for a real model). Any number of such workers, on
//! any number of machines, can share one bucket prefix: a conversation is run by one at a time.
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;
use std::time::Duration;

use flemma::core::Conversation;
use flemma::object::object_store::memory::InMemory;
use flemma::object::{Assignment, Bucket, Finished, ObjectConversation, Worker, WorkerOptions};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::{Session, Stop};
use flemma::runtime::{ToolRegistry, register_builtins};
use tokio_util::sync::CancellationToken;

const CONVERSATIONS: [&str; 3] = ["support/a.chat", "support/b.chat", "support/c.chat"];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let bucket = Bucket::with_store("chats", Arc::new(InMemory::new()));
    for key in CONVERSATIONS {
        let text = "@You:\nWhat is in your directory?\n";
        ObjectConversation::create(&bucket, &key.into(), text).await?;
    }
    // Where the conversations' tools work and their stores live on this machine:
    // WORKDIR/BUCKET/KEY; here a temporary directory, removed when `workdir` is dropped.
    let workdir = tempfile::Builder::new()
        .prefix("flemma-worker-example-")
        .tempdir()?;
    let tools = ToolRegistry::new();
    register_builtins(&tools)?;

    let worker = Worker::new(
        bucket.clone(),
        "support".into(),
        WorkerOptions::new()
            .concurrency(2)
            .poll_interval(Duration::from_millis(100))
            .workdir(workdir.path()),
    );
    // The runner: one session per assignment, stopped when the worker says so (the lease was
    // lost, or the worker is shutting down).
    let runner = move |assignment: Assignment| {
        let tools = tools.clone();
        async move {
            let model = Arc::new(ScriptedProvider::new([
                Turn::tool_use("ls", serde_json::json!({ "path": "." })),
                Turn::text("Only the conversation's store directory."),
            ]));
            let conversation = Arc::clone(&assignment.conversation) as Arc<dyn Conversation>;
            let session = Session::builder(conversation, tools, model).build();
            let run = session.run();
            tokio::pin!(run);
            let stop = tokio::select! {
                stop = &mut run => stop,
                () = assignment.stop.cancelled() => {
                    session.cancel_all();
                    run.await
                }
            }?;
            if stop != Stop::Finished {
                return Err(format!("{}: stopped early: {stop:?}", assignment.url).into());
            }
            Ok(())
        }
    };
    let shutdown = CancellationToken::new();
    let mut finished = Vec::new();
    let stop = shutdown.clone();
    worker
        .run(
            runner,
            |done: Finished| {
                println!(
                    "{}: {} ({} object requests)",
                    done.url,
                    done.error.as_deref().unwrap_or("done"),
                    done.requests.total()
                );
                finished.push(done);
                if finished.len() == CONVERSATIONS.len() {
                    stop.cancel();
                }
            },
            shutdown,
        )
        .await?;

    for key in CONVERSATIONS {
        let text = ObjectConversation::open(&bucket, &key.into())
            .await?
            .snapshot()
            .await?
            .text;
        anyhow::ensure!(
            text.ends_with("Only the conversation's store directory.\n\n@You:\n"),
            "{key} is not finished:\n{text}"
        );
        let lease = flemma::object::read_lease(&bucket, &key.into()).await?;
        anyhow::ensure!(lease.is_some_and(|l| l.released), "{key}: lease still held");
    }
    let text = ObjectConversation::open(&bucket, &CONVERSATIONS[0].into())
        .await?
        .snapshot()
        .await?
        .text;
    println!("\n--- {} ---\n{text}", CONVERSATIONS[0]);
    Ok(())
}
